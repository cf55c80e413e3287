package supervisor

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/corral-sh/corral/internal/shellstate"
	"github.com/corral-sh/corral/killtree"
)

// MaxSessionStateBytes bounds a session's saved state as the shell reports
// it. A larger state is not saved, and the Result's stderr note says so.
const MaxSessionStateBytes = 256 << 10

// DefaultMaxSessions bounds the sessions a Supervisor keeps state for.
const DefaultMaxSessions = 1024

// StatelessSession is the session a request that names none belongs to. It
// never carries state.
const StatelessSession = "default"

// SessionInfo describes one session. EnvNames lists the names of the
// variables it carries, never their values.
type SessionInfo struct {
	ID         string    `json:"id"`
	Cwd        string    `json:"cwd"`
	EnvNames   []string  `json:"envNames"`
	Running    int       `json:"running"`
	CreatedAt  time.Time `json:"createdAt"`
	LastUsedAt time.Time `json:"lastUsedAt"`
}

// session is the state a named session carries from one command to the
// next: the working directory and the exported variables its last command
// that exited by itself ended with. The environment lives in memory only.
// Its fields are guarded by the table's mutex.
type session struct {
	id       string
	startDir string   // where its first command started; the fallback for a vanished cwd
	cwd      string   // "" until a command saved its state
	env      []string // nil until a command saved its state
	running  int      // tracked commands of it running now
	gen      uint64   // counts resets: a command started before the last one saves nothing
	created  time.Time
	used     time.Time
}

// sessionTable owns every session of a Supervisor.
type sessionTable struct {
	mu  sync.Mutex
	max int
	m   map[string]*session // guarded by mu

	// scripts are the shared start-up scripts (Linux: statechan_linux.go),
	// one per shellstate.Script variant: see scriptIndex.
	scripts [3]struct {
		once sync.Once
		f    *os.File
		err  error
	}
}

// scriptIndex numbers the shellstate.Script variants: tracked, tracked and
// gated, gated.
func scriptIndex(tracked, gated bool) int {
	switch {
	case !gated:
		return 0
	case tracked:
		return 1
	}
	return 2
}

func (t *sessionTable) init(max int) {
	t.max = cmp.Or(max, DefaultMaxSessions)
	t.m = map[string]*session{}
}

// stateStart is what a tracked command starts from.
type stateStart struct {
	sess  *session
	gen   uint64   // the session's gen when the command started
	dir   string   // the working directory; "" is the supervisor's
	env   []string // the base environment; nil is the supervisor's
	note  string   // said on the Result's stderr (a vanished cwd)
	ch    stateChannel
	gated bool     // the script holds the start gate (journalgate.go)
	extra []string // what the child's environment gains (stateEnv)

	// static: the command cannot change the state (shellstate.LeavesAlone), so
	// it reports none and the state it starts with is saved instead: the
	// shell's working directory and environment, set by prepare.
	static   bool
	startDir string
	startEnv []string
	dirFile  *os.File // the start directory held open (openStartDir); nil when not
}

// tracked reports whether v's command carries session state.
func (s *Supervisor) tracked(v validated) bool {
	return !s.cfg.NoSessionState && v.Session != StatelessSession && filepath.Base(s.shell) == "bash"
}

// beginState looks the session up (making it, or evicting the least
// recently used idle session past the bound), applies a reset, and returns
// the directory and environment the command starts from together with the
// channel that carries its state back (stateChannel). The caller prepares
// the command with it and tells it when the command started, or abandons it.
func (s *Supervisor) beginState(v validated, gated bool) (*stateStart, error) {
	// A session the journal knows and memory does not (corral restarted,
	// or evicted it): its working directory resumes, its variables are
	// gone. The journal is read before the table is locked: no storage
	// I/O under the table's lock.
	journaled := ""
	if !v.ResetSession && !s.knownSession(v.Session) {
		journaled = s.journaledCwd(v.Session)
	}
	st, cwd, resumed := s.enterSession(v, journaled)
	if resumed != "" {
		st.note = fmt.Sprintf("[corral: this session's exported variables were reset to the server's environment "+
			"(corral restarted, or forgot the idle session); its working directory %s was kept.]", resumed)
	}

	if st.dir == "" && cwd != "" {
		if usable, why := v.usableDir(cwd); usable {
			st.dir = cwd
		} else {
			st.dir = st.sess.startDir
			if ok, _ := v.usableDir(st.dir); !ok {
				st.dir = ""
			}
			st.note = withNote(st.note, fmt.Sprintf("[corral: the session's working directory %s %s; the command ran in %s.]",
				cwd, why, cmp.Or(st.dir, "the default working directory")))
		}
	}

	if v.Argv != nil {
		return st, nil // a program, not the shell: nothing reports its end state
	}
	envNow := st.env
	if envNow == nil {
		envNow = os.Environ()
	}
	// What the request unsets and the configuration scrubs never reaches
	// the shell: the script must not restore it, nor the checks see it.
	envNow = slices.DeleteFunc(slices.Clone(envNow), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return slices.Contains(v.Unset, k) || slices.Contains(s.cfg.Scrub, k)
	})
	bashEnv, hasBashEnv := lookupEnv(envNow, "BASH_ENV")
	if val, ok := v.Env["BASH_ENV"]; ok {
		bashEnv, hasBashEnv = val, true
	}
	if !hasBashEnv && !testHookAlwaysReport && shellstate.LeavesAlone(v.Command) && shellstate.PlainEnv(envNow) && shellstate.PlainEnv(envOf(v.Env)) &&
		listingBound(envNow)+listingBound(envOf(v.Env)) <= MaxSessionStateBytes/2 {
		st.static = true
		return st, nil
	}
	var err error
	if st.ch, st.gated, err = s.openStateChannel(gated); err != nil {
		s.endState(st, nil)
		return nil, fmt.Errorf("supervisor: session state: %w", err)
	}
	st.extra = shellstate.Env(bashEnv, hasBashEnv)
	return st, nil
}

// usableDir reports whether the command can start in dir: it is a
// directory, and the user the command runs as may enter it; why says what
// is wrong when not.
func (v validated) usableDir(dir string) (ok bool, why string) {
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		return false, "no longer exists"
	}
	if v.user != nil && !v.user.canEnter(dir) {
		return false, "can no longer be entered by user " + v.user.name
	}
	return true, ""
}

// knownSession reports whether the table holds the session.
func (s *Supervisor) knownSession(id string) bool {
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id] != nil
}

// enterSession finds or makes v's session in the table (a new one resumes
// journaled, the working directory the journal keeps for it, unless it
// is reset), applies a reset and counts the command as running in it. It
// returns the command's start and the session's working directory, and
// resumed: the journaled directory when the session resumed it.
func (s *Supervisor) enterSession(v validated, journaled string) (st *stateStart, cwd, resumed string) {
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	sess := t.m[v.Session]
	now := time.Now()
	if sess == nil {
		t.evictLocked()
		wd, _ := os.Getwd()
		sess = &session{id: v.Session, startDir: cmp.Or(v.Dir, wd), created: now}
		if journaled != "" && !v.ResetSession {
			sess.cwd, resumed = journaled, journaled
		}
		t.m[v.Session] = sess
	}
	if v.ResetSession {
		sess.cwd, sess.env = "", nil
		sess.gen++
	}
	sess.used = now
	sess.running++
	return &stateStart{sess: sess, gen: sess.gen, dir: v.Dir, env: sess.env}, sess.cwd, resumed
}

// testHookAlwaysReport, set by a test, makes every tracked command report
// its state, static or not.
var testHookAlwaysReport bool

func envOf(m map[string]string) []string {
	out := make([]string, 0, len(m))
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	return out
}

// prepare points cmd at the state channel and the start-up script, or
// notes what a static command starts with.
func (st *stateStart) prepare(cmd *exec.Cmd) {
	if st.static {
		st.startDir, st.startEnv = cmd.Dir, cmd.Env
		if st.startDir == "" {
			st.startDir, _ = os.Getwd()
		}
		st.dirFile = openStartDir(st.startDir)
		return
	}
	if st.ch == nil {
		return
	}
	cmd.ExtraFiles = st.ch.childFiles()
	cmd.Env = append(cmd.Env, st.extra...)
}

// abandon undoes beginState for a command that did not start.
func (s *Supervisor) abandonState(st *stateStart) {
	if st.ch != nil {
		st.ch.close()
	}
	if st.dirFile != nil {
		st.dirFile.Close()
	}
	s.endState(st, nil)
}

// finishState collects what the shell reported and, when the shell exited by
// itself, saves it as the session's state. It returns the working directory
// the session's next command starts in and a note for the Result.
func (s *Supervisor) finishState(st *stateStart, exitedByItself bool) (cwd, note string) {
	if st == nil {
		return "", ""
	}
	var r stateRead
	if st.ch != nil {
		r = st.ch.collect()
		st.ch.close()
	}
	var notes []string
	if st.note != "" {
		notes = append(notes, st.note)
	}
	if st.dirFile != nil {
		defer st.dirFile.Close()
	}
	var saved *savedState
	switch {
	case !exitedByItself:
	case st.static:
		saved = s.staticState(st)
	case st.ch == nil:
	case r.tooLong:
		notes = append(notes, tooLongNote)
	default:
		dir, env, err := shellstate.Parse(r.data)
		if err == nil {
			env = s.keepEnv(env)
			if name, n := overArgStrlen(env); name != "" {
				notes = append(notes, fmt.Sprintf("[corral: the session state was not saved: the exported variable %s "+
					"is %d bytes, over the kernel's limit of %d KiB for one variable (MAX_ARG_STRLEN), and would "+
					"keep every later command from starting; the next command starts where this one started.]",
					name, n, maxArgStrlen>>10))
				break
			}
			saved = &savedState{cwd: dir, env: env}
		} else if !errors.Is(err, shellstate.ErrMissing) {
			s.log.Warn().Err(err).Str("session", st.sess.id).Msg("session state not saved")
		}
	}
	return s.endState(st, saved), strings.Join(notes, "\n")
}

var tooLongNote = fmt.Sprintf("[corral: the session state (working directory and exported variables) "+
	"is over the %d KiB limit and was not saved; the next command starts where this one started.]",
	MaxSessionStateBytes>>10)

// overArgStrlen names the first variable of env that execve would refuse
// alone (E2BIG: NAME=value and its NUL over MAX_ARG_STRLEN, Linux), with
// its size; "" when none is. A state holding one is not saved: no later
// command of the session could start, `unset` included. The state as a
// whole is bounded far below ARG_MAX by MaxSessionStateBytes.
func overArgStrlen(env []string) (string, int) {
	for _, kv := range env {
		if len(kv)+1 > maxArgStrlen {
			name, _, _ := strings.Cut(kv, "=")
			return name, len(kv)
		}
	}
	return "", 0
}

// staticState is the state a static command's shell would have reported:
// its working directory as `pwd -P` gives it (the directory as given when
// it no longer resolves, as bash falls back to $PWD) and its exported
// variables. beginState made sure it is far below MaxSessionStateBytes.
func (s *Supervisor) staticState(st *stateStart) *savedState {
	dir := st.startDir
	if dir == "" {
		dir, _ = os.Getwd()
	}
	if st.dirFile != nil {
		// The command may have renamed the directory it ran in (`mv`
		// of it or a parent): follow it, as the shell's pwd -P would.
		if p, moved := followDir(st.dirFile, dir); moved {
			dir = p
		}
	}
	if p, err := filepath.EvalSymlinks(dir); err == nil {
		dir = p
	}
	return &savedState{cwd: dir, env: s.keepEnv(shellstate.Exports(st.startEnv))}
}

// listingBound bounds the bytes of the `export -p` lines env becomes:
// `declare -x NAME="value"` a variable, each byte of it at most four
// (`$'\001'`).
func listingBound(env []string) int {
	n := 0
	for _, kv := range env {
		n += len("declare -x =\"\"\n") + 4*len(kv)
	}
	return n
}

type savedState struct {
	cwd string
	env []string
}

// endState records that a tracked command ended, saving its state when
// given, unless the session was reset after the command started (the reset
// wins), and returns the session's working directory.
func (s *Supervisor) endState(st *stateStart, saved *savedState) string {
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	st.sess.running--
	st.sess.used = time.Now()
	if saved != nil && st.gen == st.sess.gen {
		st.sess.cwd, st.sess.env = saved.cwd, saved.env
	}
	return cmp.Or(st.sess.cwd, st.dir, st.sess.startDir)
}

// keepEnv drops what must not be carried: corral's own variables, the
// prompt suppression it set (a value the command chose is kept), the
// scrubbed names, and bash's bookkeeping.
func (s *Supervisor) keepEnv(env []string) []string {
	defaults := map[string]string{}
	for _, kv := range promptSuppression {
		k, v, _ := strings.Cut(kv, "=")
		defaults[k] = v
	}
	return slices.DeleteFunc(env, func(kv string) bool {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case RunIDEnv, killtree.EnvTag, shellstate.UserBashEnv, "PWD", "OLDPWD", "SHLVL", "_":
			return true
		}
		if d, ok := defaults[k]; ok && d == v {
			return true
		}
		return slices.Contains(s.cfg.Scrub, k)
	})
}

// evictLocked forgets the least recently used idle session once the table
// is full. Sessions with a command running are never evicted, so the table
// can exceed its bound by the commands running at once.
func (t *sessionTable) evictLocked() {
	if len(t.m) < t.max {
		return
	}
	var oldest *session
	for _, sess := range t.m {
		if sess.running == 0 && (oldest == nil || sess.used.Before(oldest.used)) {
			oldest = sess
		}
	}
	if oldest != nil {
		delete(t.m, oldest.id)
	}
}

func lookupEnv(env []string, name string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := strings.Cut(env[i], "="); ok && k == name {
			return v, true
		}
	}
	return "", false
}

func (sess *session) info() SessionInfo {
	names := make([]string, 0, len(sess.env))
	for _, kv := range sess.env {
		k, _, _ := strings.Cut(kv, "=")
		names = append(names, k)
	}
	slices.Sort(names)
	return SessionInfo{ID: sess.id, Cwd: cmp.Or(sess.cwd, sess.startDir), EnvNames: names,
		Running: sess.running, CreatedAt: sess.created, LastUsedAt: sess.used}
}

// List lists the sessions that carry state, most recently used first.
func (h *Sessions) List() []SessionInfo {
	s := h.s
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]SessionInfo, 0, len(t.m))
	for _, sess := range t.m {
		out = append(out, sess.info())
	}
	slices.SortFunc(out, func(a, b SessionInfo) int { return b.LastUsedAt.Compare(a.LastUsedAt) })
	return out
}

// Get describes one session; ok is false when the Supervisor keeps no
// state for it.
func (h *Sessions) Get(id string) (SessionInfo, bool) {
	s := h.s
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	sess, ok := t.m[id]
	if !ok {
		return SessionInfo{}, false
	}
	return sess.info(), true
}

// Forget drops a session's state; its running commands go on, and
// what they report is not saved. It reports whether there was state.
func (h *Sessions) Forget(id string) bool {
	s := h.s
	t := &s.sessions
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.m[id]
	delete(t.m, id)
	return ok
}
