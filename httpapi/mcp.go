package httpapi

import (
	"context"
	"net/http"

	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/mcpapi"
	"github.com/mcpflow/mcpflow/service"
)

// mcpHandler is mcpflow as an MCP server over streamable HTTP (package
// mcpapi), at /mcp: the workspace's workflows as tools, runs started as
// the API starts them. It sits behind the listener's own checks (Host,
// token: see Handler), and refuses a browser's request from another
// origin as a state-changing API request is refused (sameOrigin).
func (s *Server) mcpHandler() (http.Handler, error) {
	m, err := mcpapi.New(&mcpapi.Options{
		Dir: s.o.Workspace, Local: s.svc, Version: s.o.Version,
		Backend: func(context.Context, bool) (service.API, func(), error) {
			_, shared := s.pool()
			return &mcpRuns{Local: &service.Local{Service: s.svc, Shared: shared}, s: s}, func() {}, nil
		},
		Logf: func(format string, args ...any) { s.logf("mcp: "+format, args...) },
	})
	if err != nil {
		return nil, err
	}
	h := m.Handler()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !sameOrigin(r) {
			writeError(w, http.StatusForbidden, "cross_site", "cross-origin requests are refused")
			return
		}
		h.ServeHTTP(w, r)
	}), nil
}

// mcpRuns is service.API for the MCP endpoint: the service's own queries,
// and runs that go as the API's do, in a goroutine the server owns (Stop
// waits for it, then aborts it), their events published to the API's
// subscribers too, followed here until they end.
type mcpRuns struct {
	*service.Local
	s *Server
}

// Run starts the run in the server and follows it to its end; a caller
// that goes away (ctx) leaves it going, as a client of the API does
// (*service.DetachedError).
func (m *mcpRuns) Run(ctx context.Context, req service.RunRequest) (*service.Report, error) {
	type end struct {
		rep *service.Report
		err error
	}
	ended := make(chan end, 1)
	events := req.Events
	id, err := m.s.launch(m.s.base, func(ctx context.Context, publish func(engine.Event)) error {
		req.Events = func(ev engine.Event) {
			publish(ev)
			if events != nil {
				events(ev)
			}
		}
		rep, err := m.s.svc.Run(ctx, req)
		ended <- end{rep, err}
		return err
	})
	if err != nil {
		return nil, err
	}
	select {
	case e := <-ended:
		return e.rep, e.err
	case <-ctx.Done():
		return nil, &service.DetachedError{Run: id}
	}
}
