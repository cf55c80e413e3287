package api

import (
	"net/http"
	"time"
)

// events serves GET /v1/events: NDJSON, one line per event of the caller's
// jobs (tenancy.go; every job's with SharedJobs) from the moment of the
// request: {"event":"exited","jobId","at","result"} when a job ends, and
// {"event":"waiting","jobId","at","waiting"} once per wait for input. After
// Config.Heartbeat of silence a {"event":"keepalive"} line goes out. The
// stream ends when the client goes or the server shuts down. A subscriber
// that falls 256 events behind loses the oldest (docs/wire.md, Job events).
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	sub := s.sup.Jobs().Subscribe(s.httpOwner(r), s.sharedJobs)
	defer sub.Close()
	rc := http.NewResponseController(w)
	w.Header().Set("Content-Type", NDJSONType)
	w.WriteHeader(http.StatusOK)
	rc.Flush()
	enc := NewEncoder(w)
	beat := time.NewTicker(s.beat)
	defer beat.Stop()
	for {
		select {
		case ev := <-sub.C:
			if enc.Encode(ev) != nil || rc.Flush() != nil {
				return
			}
			beat.Reset(s.beat)
		case <-beat.C:
			if enc.Encode(map[string]string{"event": EventKeepalive}) != nil || rc.Flush() != nil {
				return
			}
		case <-r.Context().Done():
			return
		case <-s.base.Done():
			return
		}
	}
}
