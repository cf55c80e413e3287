package killtree

import (
	"bytes"
	"encoding/json"
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

// tierCacheFile is what the cache file holds.
type tierCacheFile struct {
	Key   string       `json:"key"`
	Tiers []TierStatus `json:"tiers"`
}

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
		"killtree-tiers-1",
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
	var f tierCacheFile
	if json.Unmarshal(b, &f) != nil || f.Key != key || len(f.Tiers) == 0 {
		return nil
	}
	return f.Tiers
}

// storeTierCache records st as the detection for cfg, replacing the file
// whole (a reader sees the old content or the new). Failing to write is no
// error: the cache only saves time.
func storeTierCache(cfg Config, st []TierStatus) {
	key := tierCacheKey(cfg)
	if cfg.TierCache == "" || key == "" {
		return
	}
	b, err := json.Marshal(tierCacheFile{Key: key, Tiers: st})
	if err != nil {
		return
	}
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
