package deploy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
)

// No Docker engine runs these tests: the Dockerfile is parsed, not built.

// instr is one Dockerfile instruction.
type instr struct {
	cmd  string // upper case: FROM, RUN, ...
	args string // the rest, continuation lines joined
	line int
}

// stage is one build stage.
type stage struct {
	base, name string
	instrs     []instr
}

// last returns the stage's last cmd instruction, or nil.
func (s *stage) last(cmd string) *instr {
	for i := len(s.instrs) - 1; i >= 0; i-- {
		if s.instrs[i].cmd == cmd {
			return &s.instrs[i]
		}
	}
	return nil
}

// all returns the args of every cmd instruction of the stage.
func (s *stage) all(cmd string) []string {
	var out []string
	for _, in := range s.instrs {
		if in.cmd == cmd {
			out = append(out, in.args)
		}
	}
	return out
}

// parseDockerfile splits a Dockerfile into the global ARGs and its stages.
func parseDockerfile(data []byte) (args map[string]string, stages []*stage, err error) {
	args = map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(data))
	var cur strings.Builder
	start := 0
	flush := func(n int) error {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return nil
		}
		cmd, rest, _ := strings.Cut(text, " ")
		in := instr{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(rest), line: start}
		switch {
		case in.cmd == "FROM":
			f := strings.Fields(in.args)
			st := &stage{base: f[0]}
			if len(f) == 3 && strings.EqualFold(f[1], "AS") {
				st.name = f[2]
			}
			stages = append(stages, st)
		case len(stages) == 0 && in.cmd == "ARG":
			k, v, _ := strings.Cut(in.args, "=")
			args[k] = v
		case len(stages) == 0:
			return fmt.Errorf("line %d: %s before the first FROM", start, in.cmd)
		default:
			stages[len(stages)-1].instrs = append(stages[len(stages)-1].instrs, in)
		}
		return nil
	}
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") {
			continue // comments and parser directives
		}
		if cur.Len() == 0 {
			start = n
		}
		if body, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(body + " ")
			continue
		}
		cur.WriteString(trimmed)
		if err := flush(n); err != nil {
			return nil, nil, err
		}
	}
	return args, stages, sc.Err()
}

// execForm decodes a JSON-array (exec form) ENTRYPOINT or CMD.
func execForm(in *instr) ([]string, error) {
	if in == nil {
		return nil, fmt.Errorf("missing")
	}
	var out []string
	if err := json.Unmarshal([]byte(in.args), &out); err != nil {
		return nil, fmt.Errorf("line %d: %q is not the exec form: %w", in.line, in.args, err)
	}
	return out, nil
}

func loadDockerfile(t *testing.T) (map[string]string, map[string]*stage, []*stage) {
	t.Helper()
	data, err := os.ReadFile("Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	args, stages, err := parseDockerfile(data)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*stage{}
	for _, s := range stages {
		byName[s.name] = s
	}
	return args, byName, stages
}

// imageCmd returns a stage's effective CMD, inherited from its base stage
// when it has none.
func imageCmd(byName map[string]*stage, s *stage) *instr {
	for s != nil {
		if in := s.last("CMD"); in != nil {
			return in
		}
		s = byName[s.base]
	}
	return nil
}

// TestDockerfile checks the promises of deploy/README.md about the image:
// the stages, who runs corral in each, the entrypoint and the command.
func TestDockerfile(t *testing.T) {
	t.Parallel()
	args, byName, stages := loadDockerfile(t)

	// Stages: a Go builder, the userland, corral-root (one layer of the
	// userland, then the binary), and corral last (the default target).
	if len(stages) != 4 || stages[0].name != "build" || stages[1].name != "userland" || stages[2].name != "corral-root" || stages[3].name != "corral" {
		var names []string
		for _, s := range stages {
			names = append(names, s.name)
		}
		t.Fatalf("stages %q, want build, userland, corral-root, corral (the last is the default target)", names)
	}
	build, userland, root, nonroot := stages[0], stages[1], stages[2], stages[3]
	if build.base != "${GO_IMAGE}" || !strings.HasPrefix(args["GO_IMAGE"], "golang:${GO_VERSION}") {
		t.Errorf("builder FROM %s (GO_IMAGE=%s), want ${GO_IMAGE} defaulting to golang:${GO_VERSION}-...", build.base, args["GO_IMAGE"])
	}
	if userland.base != "${BASE}" || !strings.HasPrefix(args["BASE"], "debian:") {
		t.Errorf("userland FROM %s (BASE=%s), want ${BASE} defaulting to a Debian image", userland.base, args["BASE"])
	}
	if root.base != "scratch" || !strings.Contains(strings.Join(root.all("COPY"), "\n"), "--from=userland / /") {
		t.Errorf("corral-root FROM %s, COPY %q: want scratch and the userland copied in one layer", root.base, root.all("COPY"))
	}
	if env := strings.Join(root.all("ENV"), "\n"); !strings.Contains(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin") {
		t.Errorf("corral-root ENV %q: an image FROM scratch needs its PATH", env)
	}
	if nonroot.base != "corral-root" {
		t.Errorf("corral FROM %s, want corral-root (one image, two users)", nonroot.base)
	}
	if want := goDirective(t); !strings.HasPrefix(want, args["GO_VERSION"]) || args["GO_VERSION"] == "" {
		t.Errorf("ARG GO_VERSION=%q, but go.mod says go %s", args["GO_VERSION"], want)
	}

	// The binaries the builder makes are the ones the image holds: corral
	// and the corral-server its serve executes, side by side.
	if !strings.Contains(strings.Join(build.all("RUN"), "\n"), "-o /out/ ./cmd/corral ./cmd/corral-server") {
		t.Error("the builder does not build ./cmd/corral and ./cmd/corral-server into /out/")
	}
	copies := strings.Join(root.all("COPY"), "\n")
	for _, want := range []string{"--from=build /out/corral /out/corral-server /usr/local/bin/", "deploy/entrypoint.sh /usr/local/bin/corral-entrypoint"} {
		if !strings.Contains(copies, want) {
			t.Errorf("corral-root does not COPY %s", want)
		}
	}
	if _, err := os.Stat("entrypoint.sh"); err != nil {
		t.Error(err)
	}
	run := strings.Join(userland.all("RUN"), "\n")
	for _, want := range []string{"bash", "coreutils", "procps", "ca-certificates", "useradd --uid 10001", "useradd --uid 10002", " sandbox", "chmod a-s",
		`if [ "$SLIM" = 1 ]`, "/usr/bin/dpkg*", "/usr/bin/perl*", "/usr/lib/*/gconv"} {
		if !strings.Contains(run, want) {
			t.Errorf("userland's RUN lacks %q", want)
		}
	}
	if len(root.all("RUN")) != 0 {
		t.Errorf("corral-root RUNs %q: each RUN is a layer more; the userland stage does the work", root.all("RUN"))
	}

	// Who runs corral: root in corral-root, uid 10001 (numeric, so that
	// Kubernetes' runAsNonRoot can check it) in corral.
	for _, tc := range []struct {
		s    *stage
		user string
	}{{root, "0:0"}, {nonroot, "10001:10001"}} {
		if in := tc.s.last("USER"); in == nil || in.args != tc.user {
			t.Errorf("stage %s: USER %v, want %s", tc.s.name, in, tc.user)
		}
	}

	// The entrypoint, in the exec form so that corral gets SIGTERM, and the
	// commands of both targets.
	ep, err := execForm(root.last("ENTRYPOINT"))
	if err != nil || len(ep) != 1 || ep[0] != "/usr/local/bin/corral-entrypoint" {
		t.Errorf("corral-root ENTRYPOINT %q (%v), want [/usr/local/bin/corral-entrypoint]", ep, err)
	}
	if nonroot.last("ENTRYPOINT") != nil {
		t.Error("corral overrides the entrypoint")
	}
	for _, tc := range []struct {
		s     *stage
		runAs string
	}{{root, "sandbox"}, {nonroot, ""}} {
		cmd, err := execForm(imageCmd(byName, tc.s))
		if err != nil {
			t.Errorf("stage %s: CMD: %v", tc.s.name, err)
			continue
		}
		s, err := parseServe(cmd)
		if err != nil {
			t.Errorf("stage %s: CMD: %v", tc.s.name, err)
			continue
		}
		if s.flags["listen"] != fmt.Sprintf("0.0.0.0:%d", httpPort) || s.flags["run-as"] != tc.runAs {
			t.Errorf("stage %s: CMD %q, want --listen 0.0.0.0:%d and --run-as %q", tc.s.name, cmd, httpPort, tc.runAs)
		}
		if err := s.checkNoTokenOnCommandLine(); err != nil {
			t.Errorf("stage %s: %v", tc.s.name, err)
		}
	}
	if in := root.last("EXPOSE"); in == nil || in.args != fmt.Sprint(httpPort) {
		t.Errorf("EXPOSE %v, want %d", in, httpPort)
	}
	if in := root.last("STOPSIGNAL"); in == nil || in.args != "SIGTERM" {
		t.Errorf("STOPSIGNAL %v, want SIGTERM", in)
	}
}

// goDirective is the go directive of corral's go.mod.
func goDirective(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\S+)$`).FindSubmatch(data)
	if m == nil {
		t.Fatal("../go.mod has no go directive")
	}
	return string(m[1])
}

// buildCommands are the two docker build commands; the Dockerfile's header
// and deploy/README.md must both give them, and the manifests use their tags.
var buildCommands = []string{
	"docker build -f deploy/Dockerfile -t corral .",
	"docker build -f deploy/Dockerfile --target corral-root -t corral:root .",
}

// TestBuildCommandDocumented keeps the documented build commands and the
// manifests' images in step with the Dockerfile.
func TestBuildCommandDocumented(t *testing.T) {
	t.Parallel()
	space := regexp.MustCompile(`\s+`)
	for _, f := range []string{"Dockerfile", "README.md"} {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := space.ReplaceAllString(string(data), " ")
		for _, c := range buildCommands {
			if !strings.Contains(text, c) {
				t.Errorf("%s does not give %q", f, c)
			}
		}
	}
	for file, objs := range manifests(t) {
		for _, obj := range objs {
			spec, _ := podSpec(obj)
			if spec == nil {
				continue
			}
			cs, err := corralContainers(spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, c := range cs {
				if c.c.Image != "corral:latest" && c.c.Image != "corral:root" {
					t.Errorf("%s: image %s is neither build command's tag", file, c.c.Image)
				}
			}
		}
	}
}

// TestDockerfileIsContainerfile: deploy/Dockerfile is deploy/Containerfile
// under Docker's name, so the two cannot drift apart.
func TestDockerfileIsContainerfile(t *testing.T) {
	t.Parallel()
	target, err := os.Readlink("Dockerfile")
	if err != nil || target != "Containerfile" {
		t.Errorf("Dockerfile: a symlink to %q (%v), want one to Containerfile", target, err)
	}
}
