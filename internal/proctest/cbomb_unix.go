//go:build unix

package proctest

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
)

//go:embed csrc/bomb.c
var bombC []byte

// cBomb returns the path of bomb.c compiled with the system C compiler,
// building it once per machine (cached in the temp directory under the
// source's hash), or "" when there is no C compiler: the bomb then falls
// back to re-executing this binary, which costs far more per process.
func cBomb() string {
	sum := sha256.Sum256(bombC)
	dir := filepath.Join(os.TempDir(), "corral-proctest")
	path := filepath.Join(dir, "bomb-"+hex.EncodeToString(sum[:8]))
	if fi, err := os.Stat(path); err == nil && fi.Mode()&0o111 != 0 {
		return path
	}
	cc, err := exec.LookPath("cc")
	if err != nil {
		if cc, err = exec.LookPath("gcc"); err != nil {
			return ""
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return ""
	}
	src := path + ".c"
	tmp := path + ".tmp-" + strconv.Itoa(os.Getpid())
	if err := os.WriteFile(src+strconv.Itoa(os.Getpid()), bombC, 0o644); err != nil {
		return ""
	}
	defer os.Remove(src + strconv.Itoa(os.Getpid()))
	cmd := exec.Command(cc, "-O2", "-x", "c", "-o", tmp, src+strconv.Itoa(os.Getpid()))
	if out, err := cmd.CombinedOutput(); err != nil {
		os.Stderr.Write(out)
		os.Remove(tmp)
		return ""
	}
	if err := os.Rename(tmp, path); err != nil { // atomic: concurrent builders agree
		os.Remove(tmp)
		return ""
	}
	return path
}

// execCBomb replaces this process with the C bomb when one can be built;
// it returns only when it cannot.
func execCBomb(mode, budget string) {
	path := cBomb()
	if path == "" {
		return
	}
	syscall.Exec(path, []string{"proctest-bomb", mode, budget}, os.Environ())
}
