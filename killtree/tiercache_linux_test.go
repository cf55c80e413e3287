package killtree

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/corral-sh/corral/internal/proctest"
)

// writeTierCache writes a cache file for cfg holding st, under key (the
// right one when key is "").
func writeTierCache(t *testing.T, cfg Config, key string, st []TierStatus) {
	t.Helper()
	if key == "" {
		key = tierCacheKey(cfg.withDefaults())
	}
	if err := os.WriteFile(cfg.TierCache, formatTierCache(key, st), 0o600); err != nil {
		t.Fatal(err)
	}
}

// cachedTiers reads the tiers the cache file of cfg holds, nil for none
// under the right key.
func cachedTiers(cfg Config) map[Tier]bool {
	st := loadTierCache(cfg.withDefaults())
	if st == nil {
		return nil
	}
	out := map[Tier]bool{}
	for _, s := range st {
		out[s.Tier] = s.Works
	}
	return out
}

// TestTierCache: New takes its tier from a cache file of this boot without
// detecting (a poisoned file that says only pgroup works is believed), a
// file of another key is ignored and rewritten, and a cached tier whose
// first Start fails is detected again, rewritten, and the Start retried on
// the tier detection then chooses.
func TestTierCache(t *testing.T) {
	safety := proctest.Safe(t, safetyPids)
	if !tierWorks(safety.Name(), TierCgroup2) {
		t.Skip("tier cgroup2 does not work here")
	}
	cfg := Config{CgroupParent: safety.Name(), TierCache: filepath.Join(t.TempDir(), "tiers")}
	newStart := func(t *testing.T) *Manager {
		t.Helper()
		m, err := New(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := spawnTrue(m, trueBinary()); err != nil {
			t.Errorf("start on %s: %v", m.Tier(), err)
		}
		return m
	}
	onlyPgroup := []TierStatus{{Tier: TierCgroup2, Reason: "cached"}, {Tier: TierPgroup, Works: true}}

	t.Run("believed", func(t *testing.T) {
		writeTierCache(t, cfg, "", onlyPgroup)
		m := newStart(t)
		defer m.Close()
		if m.Tier() != TierPgroup {
			t.Errorf("tier %s, want pgroup from the cache", m.Tier())
		}
	})
	t.Run("other-key", func(t *testing.T) {
		writeTierCache(t, cfg, "another boot", onlyPgroup)
		m := newStart(t)
		defer m.Close()
		if m.Tier() != TierCgroup2 {
			t.Errorf("tier %s, want cgroup2 (a cache of another key ignored)", m.Tier())
		}
		if got := cachedTiers(cfg); !got[TierCgroup2] {
			t.Errorf("cache after detection: %v, want cgroup2 working", got)
		}
	})
	t.Run("failed-start-rechecks", func(t *testing.T) {
		// job "works" per the file: the first Start fails on Linux.
		writeTierCache(t, cfg, "", []TierStatus{{Tier: TierJob, Works: true}, {Tier: TierPgroup, Works: true}})
		m := newStart(t)
		defer m.Close()
		if m.Tier() != TierCgroup2 {
			t.Errorf("tier %s after the failed start, want cgroup2", m.Tier())
		}
		if got := cachedTiers(cfg); got[TierJob] || !got[TierCgroup2] {
			t.Errorf("cache after the recheck: %v, want job not working, cgroup2 working", got)
		}
		if err := spawnTrue(m, trueBinary()); err != nil {
			t.Errorf("second start: %v", err)
		}
	})
}
