package trust

import (
	"os"
	"sync"
	"time"

	"github.com/mcpflow/mcpflow/journal"
	"github.com/mcpflow/mcpflow/upstream"
)

// Options configure a Resolver. Nil Options, or a nil Store, mean the
// user's default store.
type Options struct {
	// Workspace is the run's workspace directory.
	Workspace string
	// Flag is --trust-workspace: the workspace is trusted for this command.
	Flag bool
	// Store is the user's trust store (nil: OpenStore("")).
	Store *Store
	// Own are server entries whose trust is fixed for the run: a workflow's
	// own servers: section, which its journaled definition carries.
	Own upstream.Set
	// External reads the servers configured outside the workflow and lists
	// the files it read (upstream.LoadExternal). Nil: none.
	External func() (upstream.Set, []string, error)
}

// Resolver answers both trust gates of the replay rule for one run: server
// trust from the current configuration, workspace trust from the store or
// the flag. It is built once per run by the caller and handed to the engine,
// which asks it before every decision.
//
// Every answer reflects the files as they are when it is asked: the
// configuration and the store are read again when one of the files they
// came from changed (a stat of each per question; a file modified within
// two seconds of its read is read again, in case its change did not show in
// its modification time), so a fan-out of 256 calls parses them once, and
// trust removed in the middle of a run is seen by the next decision. A configuration that no longer reads,
// or a store that cannot be read, grants no trust.
//
// A Resolver is safe for concurrent use.
type Resolver struct {
	o Options

	mu       sync.Mutex
	ext      upstream.Set
	extFiles []stamp
	extRead  bool
	ws       journal.Trust
	wsFile   stamp
	wsRead   bool
}

// NewResolver returns a resolver; nothing is read until it is asked.
func NewResolver(o *Options) *Resolver {
	r := &Resolver{}
	if o != nil {
		r.o = *o
	}
	if r.o.Store == nil {
		r.o.Store = OpenStore("")
	}
	return r
}

// Trust returns the current trust of server (Workspace and WorkspaceSource
// describe the workspace gate; Server the entry's trust: true).
func (r *Resolver) Trust(server string) journal.Trust {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t journal.Trust
	if srv, ok := r.o.Own[server]; ok {
		t.Server = srv.Trust
	} else if ext := r.external(); ext != nil {
		if srv, ok := ext[server]; ok {
			t.Server = srv.Trust
		}
	}
	ws := r.workspace()
	t.Workspace, t.WorkspaceSource = ws.Workspace, ws.WorkspaceSource
	return t
}

// Workspace returns the workspace gate alone: trusted, and "flag" or
// "store:DIR".
func (r *Resolver) Workspace() (bool, string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ws := r.workspace()
	return ws.Workspace, ws.WorkspaceSource
}

// external returns the external configuration, read again if one of its
// files changed; nil when it does not read.
func (r *Resolver) external() upstream.Set {
	if r.o.External == nil {
		return nil
	}
	if r.extRead && unchanged(r.extFiles) {
		return r.ext
	}
	start := time.Now()
	set, files, err := r.o.External()
	if err != nil {
		// Read again next time: the error may be a file half written.
		r.extRead, r.ext = false, nil
		return nil
	}
	r.ext, r.extFiles = set, stamps(files)
	r.extRead = !racy(r.extFiles, start)
	return r.ext
}

func (r *Resolver) workspace() journal.Trust {
	if r.o.Flag {
		return journal.Trust{Workspace: true, WorkspaceSource: "flag"}
	}
	if r.wsRead && r.wsFile.unchanged() {
		return r.ws
	}
	// Stamp first: a change made while the store is read is seen next time.
	start := time.Now()
	ok, source := Workspace(r.o.Store, r.o.Workspace, false)
	r.ws, r.wsFile = journal.Trust{Workspace: ok, WorkspaceSource: source}, newStamp(r.o.Store.Path())
	r.wsRead = !racy([]stamp{r.wsFile}, start)
	return r.ws
}

// stamp identifies one version of a file: absent, or a file with its size
// and modification time.
type stamp struct {
	path string
	info os.FileInfo // nil: absent or unreadable
}

func newStamp(path string) stamp {
	info, err := os.Stat(path)
	if err != nil {
		info = nil
	}
	return stamp{path: path, info: info}
}

func stamps(paths []string) []stamp {
	out := make([]stamp, len(paths))
	for i, p := range paths {
		out[i] = newStamp(p)
	}
	return out
}

func (s stamp) unchanged() bool {
	now := newStamp(s.path)
	if s.info == nil || now.info == nil {
		return s.info == nil && now.info == nil
	}
	return os.SameFile(s.info, now.info) && s.info.Size() == now.info.Size() && s.info.ModTime().Equal(now.info.ModTime())
}

// racyWindow covers the coarsest modification-time granularity of common
// file systems.
const racyWindow = 2 * time.Second

// racy reports whether a file read at start may have changed during the
// read without its stamp showing it: modified within racyWindow of start.
// Such a read is used once and not cached, so the next question reads again.
func racy(ss []stamp, start time.Time) bool {
	for _, s := range ss {
		if s.info != nil && !s.info.ModTime().Before(start.Add(-racyWindow)) {
			return true
		}
	}
	return false
}

func unchanged(ss []stamp) bool {
	for _, s := range ss {
		if !s.unchanged() {
			return false
		}
	}
	return true
}
