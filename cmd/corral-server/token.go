package main

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/rs/zerolog"
)

// tokenEnv holds the server's bearer token. serve removes it from its own
// environment once read, and the supervisor scrubs it from every command's.
const tokenEnv = "CORRAL_TOKEN"

// tokenFileName is the file, in the data directory, that serve writes the
// token it generates to.
const tokenFileName = "token"

// maxTokenBytes bounds a token file: a token is a line, not a document.
const maxTokenBytes = 4096

// Where a server's token came from.
const (
	tokenFromFlag      = "flag"      // --token: visible in the process list
	tokenFromFile      = "file"      // --token-file
	tokenFromEnv       = "env"       // CORRAL_TOKEN
	tokenFromGenerated = "generated" // written to <dataDir>/token
	tokenNone          = "none"      // --insecure-no-auth
)

// serverToken is the token serve requires, and where it came from.
type serverToken struct {
	value  string
	source string // one of the tokenFrom… constants, or tokenNone
	path   string // the token file read or written; "" otherwise
}

// resolveToken picks the token of the flags: --token-file, else --token,
// else $CORRAL_TOKEN, else none with --insecure-no-auth, else a fresh one
// (32 bytes from crypto/rand, in hex) for <dataDir>/token, which the caller
// writes with writeToken once the server could be built. Contradictory flags
// are a usage error (errUsage, after a message on stderr).
func (m *Main) resolveToken(f serverFlags) (serverToken, error) {
	env := m.Getenv(tokenEnv)
	switch {
	case f.token != "" && f.tokenFile != "":
		return serverToken{}, m.usageError("corral serve: give --token or --token-file, not both")
	case f.insecureNoAuth && (f.token != "" || f.tokenFile != ""):
		return serverToken{}, m.usageError("corral serve: --insecure-no-auth contradicts a token given with --token or --token-file")
	case f.insecureNoAuth && env != "":
		return serverToken{}, m.usageError("corral serve: --insecure-no-auth contradicts the token in $" + tokenEnv + "; unset it")
	case f.tokenFile != "":
		tok, err := readTokenFile(f.tokenFile)
		return serverToken{value: tok, source: tokenFromFile, path: f.tokenFile}, err
	case f.token != "":
		tok, err := checkToken(f.token)
		if err != nil {
			return serverToken{}, fmt.Errorf("--token: %w", err)
		}
		return serverToken{value: tok, source: tokenFromFlag}, nil
	case env != "":
		tok, err := checkToken(env)
		if err != nil {
			return serverToken{}, fmt.Errorf("$%s: %w", tokenEnv, err)
		}
		return serverToken{value: tok, source: tokenFromEnv}, nil
	case f.insecureNoAuth:
		return serverToken{source: tokenNone}, nil
	}
	if f.dataDir == "" {
		return serverToken{}, errors.New("no data directory to write a generated token to: give --data-dir, --token-file or $" + tokenEnv)
	}
	var b [32]byte
	rand.Read(b[:]) // never fails (crypto/rand docs)
	return serverToken{value: hex.EncodeToString(b[:]), source: tokenFromGenerated,
		path: filepath.Join(f.dataDir, tokenFileName)}, nil
}

// serverToken resolves the token of the flags (resolveToken), removes
// $CORRAL_TOKEN from this process's environment, and warns about the ways
// of serving that expose the server.
func (m *Main) serverToken(f serverFlags, log zerolog.Logger) (serverToken, error) {
	tok, err := m.resolveToken(f)
	if err != nil {
		return tok, err
	}
	// What is read is kept only in memory. os.Unsetenv changes the copy the
	// runtime keeps (and hands to every child), not the bytes the kernel
	// shows in /proc/<pid>/environ: non-dumpable is what closes that.
	os.Unsetenv(tokenEnv)
	switch tok.source {
	case tokenFromFlag:
		log.Warn().Msg("--token puts the token on the command line, which every local process can read (/proc/<pid>/cmdline, ps); use --token-file or $" + tokenEnv)
	case tokenNone:
		log.Warn().Msg("--insecure-no-auth: no token; every local process can run commands through this server")
	}
	return tok, nil
}

func (m *Main) usageError(msg string) error {
	fmt.Fprintln(m.Stderr, msg)
	return errUsage
}

// checkToken trims the white space around a token and refuses one that is
// empty, too long, or holds anything but visible ASCII (it travels in an
// HTTP header).
func checkToken(tok string) (string, error) {
	tok = strings.TrimSpace(tok)
	switch {
	case tok == "":
		return "", errors.New("the token is empty")
	case len(tok) > maxTokenBytes:
		return "", fmt.Errorf("the token is longer than %d bytes", maxTokenBytes)
	}
	for i := 0; i < len(tok); i++ {
		if c := tok[i]; c < 0x21 || c > 0x7e {
			return "", fmt.Errorf("the token holds byte %#02x at offset %d: only visible ASCII may be sent in a header", c, i)
		}
	}
	return tok, nil
}

// readTokenFile reads a token from path, refusing a file that is not a
// regular file of this user's that only its owner may read (openOwnFile).
func readTokenFile(path string) (string, error) {
	f, err := openOwnFile(path)
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	defer f.Close()
	// Room for a line end after a token of the largest size; more is too long.
	b, err := io.ReadAll(io.LimitReader(f, maxTokenBytes+3))
	if err != nil {
		return "", fmt.Errorf("--token-file: %w", err)
	}
	tok, err := checkToken(string(b))
	if err != nil {
		return "", fmt.Errorf("--token-file %s: %w", path, err)
	}
	return tok, nil
}

// writeToken writes tok to path with mode 0600, replacing the file there
// atomically: it is written to a new file (created exclusively) in the same
// directory, synced, and renamed over path, so a reader sees the old token
// or the new one, never a part, and a symlink planted at path is replaced,
// not followed.
func writeToken(path, tok string) (retErr error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	f, err := os.CreateTemp(dir, ".token-*") // mode 0600, O_EXCL
	if err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	defer func() {
		if retErr != nil {
			os.Remove(f.Name())
		}
	}()
	_, err = f.WriteString(tok + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), path)
	}
	if err != nil {
		return fmt.Errorf("write token: %w", err)
	}
	return nil
}
