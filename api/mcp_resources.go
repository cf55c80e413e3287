package api

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/corral-sh/corral/supervisor"
)

// Jobs as MCP resources (docs/mcp.md, Job events): corral://jobs/{id}
// reads a job's status (JobInfo JSON) for the client that owns it
// (tenancy.go), and resources/list lists the caller's jobs. On a face that
// can deliver notifications (stdio, and /mcp with a session), a client
// that subscribes to a job gets notifications/resources/updated when it
// exits or starts waiting for input, and an MCP session that set a logging
// level gets a logging notification with a one-line summary of each such
// event of its own jobs. The sessionless face (protocol 2026-07-28, a
// plain POST) has no stream to carry them, so it does not advertise
// subscriptions. The notifier starts with the first subscription or
// logging/setLevel and ends with Shutdown. No face advertises listChanged:
// a new job is not announced, it is in the next resources/list.

// jobURIPrefix names a job resource: corral://jobs/<id>.
const jobURIPrefix = "corral://jobs/"

// addJobResources registers the job resource template on srv and the
// listing of the caller's jobs; on a face with notifications, also the
// subscriptions.
func (s *Server) addJobResources(srv *mcp.Server, face mcpFace) {
	desc := "A background job's status as job_list gives it (id, command, state, pid, startedAt, bytes, waiting); subscribe to be told when it exits or waits for input."
	if face == faceSessionless {
		desc = "A background job's status as job_list gives it (id, command, state, pid, startedAt, bytes, waiting). Without an MCP session there are no subscriptions: read it again, or use job_wait."
	}
	srv.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: jobURIPrefix + "{id}", Name: "job", Title: "A background job",
		Description: desc, MIMEType: "application/json"}, s.readJobResource)
	srv.AddReceivingMiddleware(s.listJobResources)
}

// jobResourceOptions sets the server options of the job resources on face:
// resources without listChanged, and subscriptions where the face can
// deliver their notifications.
func (s *Server) jobResourceOptions(o *mcp.ServerOptions, face mcpFace) {
	o.Capabilities.Resources = &mcp.ResourceCapabilities{}
	if face == faceSessionless {
		return
	}
	o.SubscribeHandler = func(ctx context.Context, req *mcp.SubscribeRequest) error {
		id, ok := strings.CutPrefix(req.Params.URI, jobURIPrefix)
		if !ok {
			return mcp.ResourceNotFoundError(req.Params.URI)
		}
		if err := s.ownJob(s.sessionOwner(req.Session, req.Extra), id); err != nil {
			return mcp.ResourceNotFoundError(req.Params.URI)
		}
		s.notifyOnce.Do(s.startNotifier)
		return nil
	}
	o.UnsubscribeHandler = func(context.Context, *mcp.UnsubscribeRequest) error { return nil }
}

// listJobResources is receiving middleware: resources/list answers, on its
// first page, the jobs the caller may see (running and retained, oldest
// first) after the server's own resources (none).
func (s *Server) listJobResources(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		lr, ok := req.(*mcp.ListResourcesRequest)
		list, _ := res.(*mcp.ListResourcesResult)
		if err != nil || !ok || list == nil || lr.Params != nil && lr.Params.Cursor != "" {
			return res, err
		}
		for _, j := range s.ownedJobs(s.sessionOwner(lr.Session, lr.Extra)) {
			list.Resources = append(list.Resources, jobResource(j))
		}
		return list, nil
	}
}

// jobResource is a job's entry in resources/list.
func jobResource(j supervisor.JobInfo) *mcp.Resource {
	state := j.State
	if j.Waiting != nil {
		state = "waiting for input"
	}
	title, _, _ := strings.Cut(j.Command, "\n")
	if len(title) > 80 {
		title = strings.ToValidUTF8(title[:80], "") // a character cut at byte 80 is dropped
	}
	return &mcp.Resource{URI: jobURIPrefix + j.ID, Name: j.ID, Title: title,
		Description: "background job, " + state, MIMEType: "application/json"}
}

// startNotifierOnSetLevel is receiving middleware: a client that sets a
// logging level is told of its jobs' events from then on, subscribed or not.
func (s *Server) startNotifierOnSetLevel(next mcp.MethodHandler) mcp.MethodHandler {
	return func(ctx context.Context, method string, req mcp.Request) (mcp.Result, error) {
		res, err := next(ctx, method, req)
		if err == nil && method == "logging/setLevel" {
			s.notifyOnce.Do(s.startNotifier)
		}
		return res, err
	}
}

func (s *Server) readJobResource(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
	id, _ := strings.CutPrefix(req.Params.URI, jobURIPrefix)
	if err := s.ownJob(s.sessionOwner(req.Session, req.Extra), id); err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	info, err := s.sup.Jobs().Get(id)
	if err != nil {
		return nil, mcp.ResourceNotFoundError(req.Params.URI)
	}
	b, _ := json.Marshal(info)
	return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: req.Params.URI, MIMEType: "application/json", Text: string(b)}}}, nil
}

// sessionOwner is mcpOwner for any request of a session.
func (s *Server) sessionOwner(ss *mcp.ServerSession, extra *mcp.RequestExtra) string {
	return s.mcpOwner(&mcp.CallToolRequest{Session: ss, Extra: extra})
}

// startNotifier forwards job events to the MCP servers until Shutdown.
func (s *Server) startNotifier() {
	sub := s.sup.Jobs().Subscribe("", true)
	s.notifier.Add(1)
	go func() {
		defer s.notifier.Done()
		defer sub.Close()
		for {
			select {
			case ev := <-sub.C:
				s.notifyJob(ev)
			case <-s.base.Done():
				return
			}
		}
	}()
}

// notifyJob tells the subscribers of ev's job, and logs a one-line summary
// to the MCP sessions that own it.
func (s *Server) notifyJob(ev supervisor.JobEvent) {
	uri := jobURIPrefix + ev.JobID
	summary := fmt.Sprintf("job %s %s", ev.JobID, ev.Event)
	switch {
	case ev.Result != nil:
		summary = fmt.Sprintf("job %s exited: %s", ev.JobID, strings.Trim(ev.Result.Status(), "[]"))
	case ev.Waiting != nil:
		summary = fmt.Sprintf("job %s %s", ev.JobID, ev.Waiting.Describe())
	}
	for _, srv := range []*mcp.Server{s.mcp, s.front.sessions} {
		srv.ResourceUpdated(s.base, &mcp.ResourceUpdatedNotificationParams{URI: uri})
		for ss := range srv.Sessions() {
			if s.sessionOwner(ss, nil) == ev.Owner || s.sharedJobs {
				ss.Log(s.base, &mcp.LoggingMessageParams{Level: "info", Logger: "corral", Data: summary})
			}
		}
	}
}
