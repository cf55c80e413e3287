package killtree

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// The tier cache (Config.TierCache) keeps what detection found for the
// rest of this boot, so that a short-lived process (the CLI, one per
// command) does not pay detection's self-test children each time. It is a
// hint, never a proof: the key names what detection depends on, and a
// Manager built on a cached answer checks it again the first time a Start
// fails (Manager.recheck).

// The file is text, its strings quoted (strconv.Quote): the key on the
// first line, then a line per tier (its name, whether it works and the
// reason, apart by spaces), then a blank line. Not JSON: encoding/json's
// first decode in a process costs more than the rest of reading the cache,
// and `corral run` decodes no other JSON.

// tierCacheKey names what detection's answer depends on: the boot (kernel,
// mounts and cgroup setup last as long as it), the user, this process's
// cgroups, CgroupParent and whether there is a fork limit. "" (no boot ID:
// not Linux, or no /proc) means no caching.
func tierCacheKey(cfg Config) string {
	boot, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil || len(bytes.TrimSpace(boot)) == 0 {
		return ""
	}
	own, _ := os.ReadFile("/proc/self/cgroup")
	return strings.Join([]string{
		"killtree-tiers-2",
		string(bytes.TrimSpace(boot)),
		strconv.Itoa(os.Geteuid()),
		string(own),
		cfg.CgroupParent,
		strconv.FormatBool(cfg.PidsMax > 0),
	}, "\n")
}

// loadTierCache returns the cached detection for cfg, or nil when there is
// none for this key.
func loadTierCache(cfg Config) []TierStatus {
	if cfg.TierCache == "" {
		return nil
	}
	key := tierCacheKey(cfg)
	b, err := os.ReadFile(cfg.TierCache)
	if key == "" || err != nil {
		return nil
	}
	return parseTierCache(b, key)
}

// formatTierCache is the file's content for st under key.
func formatTierCache(key string, st []TierStatus) []byte {
	b := strconv.AppendQuote(nil, key)
	for _, s := range st {
		b = append(b, '\n')
		b = strconv.AppendQuote(b, string(s.Tier))
		b = append(b, ' ')
		b = strconv.AppendBool(b, s.Works)
		b = append(b, ' ')
		b = strconv.AppendQuote(b, s.Reason)
	}
	return append(b, '\n', '\n')
}

// parseTierCache reads a file formatTierCache wrote; it returns nil when
// b is not one, holds no tier, or holds another key than key.
func parseTierCache(b []byte, key string) []TierStatus {
	text := string(b)
	// next takes a token ended by sep off text: a quoted string
	// (returned unquoted), or else everything up to sep.
	next := func(quoted bool, sep string) (string, bool) {
		tok, _, _ := strings.Cut(text, sep)
		if quoted {
			q, err := strconv.QuotedPrefix(text)
			if err != nil {
				return "", false
			}
			tok = q
		}
		if !strings.HasPrefix(text[len(tok):], sep) {
			return "", false
		}
		text = text[len(tok)+len(sep):]
		if !quoted {
			return tok, true
		}
		v, err := strconv.Unquote(tok)
		return v, err == nil
	}
	if k, ok := next(true, "\n"); !ok || k != key {
		return nil
	}
	var st []TierStatus
	for text != "\n" { // the blank last line: a cut file is no file
		tier, ok1 := next(true, " ")
		works, ok2 := next(false, " ")
		reason, ok3 := next(true, "\n")
		w, err := strconv.ParseBool(works)
		if !ok1 || !ok2 || !ok3 || err != nil {
			return nil
		}
		st = append(st, TierStatus{Tier: Tier(tier), Works: w, Reason: reason})
	}
	return st
}

// storeTierCache records st as the detection for cfg, replacing the file
// whole (a reader sees the old content or the new). Failing to write is no
// error: the cache only saves time.
func storeTierCache(cfg Config, st []TierStatus) {
	key := tierCacheKey(cfg)
	if cfg.TierCache == "" || key == "" {
		return
	}
	b := formatTierCache(key, st)
	dir := filepath.Dir(cfg.TierCache)
	if os.MkdirAll(dir, 0o700) != nil {
		return
	}
	tmp, err := os.CreateTemp(dir, ".tiers-*")
	if err != nil {
		return
	}
	_, werr := tmp.Write(b)
	if cerr := tmp.Close(); werr != nil || cerr != nil || os.Rename(tmp.Name(), cfg.TierCache) != nil {
		_ = os.Remove(tmp.Name()) // a failed write leaves nothing behind
	}
}

// detectFor returns the tiers' status for New: from the cache when it has
// this key's (cached true), else from detection, which then fills the
// cache.
func detectFor(cfg Config) (st []TierStatus, cached bool) {
	if st := loadTierCache(cfg); st != nil {
		return st, true
	}
	st = detect(cfg)
	storeTierCache(cfg, st)
	return st, false
}
