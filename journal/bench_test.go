package journal

import (
	"encoding/json"
	"testing"
	"time"
)

// BenchmarkStartFinish is one entry's two synced commits, as a lone writer.
func BenchmarkStartFinish(b *testing.B) {
	j, err := Open(b.TempDir(), Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer j.Close()
	res := json.RawMessage(`{"stdout":"","stderr":"","exitCode":0}`)
	for b.Loop() {
		st, err := j.Start("s", "true", time.Now())
		if err != nil {
			b.Fatal(err)
		}
		if err := j.Finish(st, time.Now(), res, ""); err != nil {
			b.Fatal(err)
		}
	}
}
