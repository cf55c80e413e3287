package journal

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"time"
)

func TestStartBatchEntries(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	before := run(t, j, "s", "before", `{}`)
	sts, bt, err := j.StartBatchEntries("s", []string{"a", "b", "c"}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for i, st := range sts {
		if st.Seq != before.Seq+1+uint64(i) || st.Command != []string{"a", "b", "c"}[i] {
			t.Errorf("entry %d: %+v", i, st)
		}
		ids = append(ids, st.ID)
	}
	if !slices.Equal(bt.ResultIDs, ids) || bt.EndedAt != nil {
		t.Fatalf("batch %+v, entries %v", bt, ids)
	}
	// Each entry is started: Finish completes it once.
	if err := j.Finish(sts[0], time.Now(), json.RawMessage(`{"n":0}`), ""); err != nil {
		t.Fatal(err)
	}
	done, _ := j.Get("s", sts[0].ID)
	j.Close() // the others and the batch stay unfinished, as after a crash

	j = open(t, dir, Options{})
	if n := j.Unfinished(); n != 3 {
		t.Fatalf("unfinished %d, want 2 entries and the batch", n)
	}
	n, err := j.Recover(time.Now(), func(e Entry) (json.RawMessage, error) {
		return json.RawMessage(`{"interrupted":true}`), nil
	})
	if err != nil || n != 2 {
		t.Fatalf("recovered %d, %v", n, err)
	}
	if again, _ := j.Get("s", sts[0].ID); !bytes.Equal(again, done) {
		t.Errorf("a finished entry changed")
	}
	got, err := j.Batch("s", bt.ID)
	if err != nil || !got.Interrupted || !slices.Equal(got.ResultIDs, ids) {
		t.Fatalf("batch after recovery %+v %v", got, err)
	}
	// A batch larger than MaxEntries keeps its newest entries only.
	small := open(t, t.TempDir(), Options{MaxEntries: 2})
	sts, _, err = small.StartBatchEntries("s", []string{"x", "y", "z"}, time.Now())
	if err != nil || len(sts) != 3 {
		t.Fatal(err)
	}
	if _, err := small.Get("s", sts[0].ID); err == nil {
		t.Errorf("entry 1 of 3 kept past MaxEntries 2")
	}
}
