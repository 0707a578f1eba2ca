package service

import (
	"crypto/sha256"
	"reflect"
	"sync"

	"github.com/mcpflow/mcpflow/upstream"
	"github.com/mcpflow/mcpflow/workflow"
)

// loaded keeps the workflows a service loaded lately. A server loads the
// same file for every run submitted to it, and a worker the same
// journaled definition for every run it claims; a load (parsing, checking,
// compiling each expression) took about 0.8 ms of CPU for a 10-step
// workflow, an eighth of a server's CPU with a thousand runs. A workflow
// is not changed once loaded: the runs share it.
type loaded struct {
	mu sync.Mutex
	m  map[loadKey]loadedWorkflow
}

// loadKey is what a workflow was loaded from: its file's name and a
// digest of its text.
type loadKey struct {
	file string
	src  [sha256.Size]byte
}

// loadedWorkflow is a workflow and the servers configured when it was
// loaded, which it holds (the steps' servers, the servers' roots).
type loadedWorkflow struct {
	external upstream.Set
	wf       *workflow.Workflow
}

// loadedMost bounds what loaded keeps: past it, it starts afresh.
const loadedMost = 64

// load is workflow.Load(file, src, external), or the workflow loaded from
// the same text against the same servers before. Errors are not kept.
func (l *loaded) load(file string, src []byte, external upstream.Set) (*workflow.Workflow, error) {
	k := loadKey{file, sha256.Sum256(src)}
	l.mu.Lock()
	e, ok := l.m[k]
	l.mu.Unlock()
	if ok && reflect.DeepEqual(e.external, external) {
		return e.wf, nil
	}
	wf, err := workflow.Load(file, src, external)
	if err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.m == nil || len(l.m) >= loadedMost {
		l.m = map[loadKey]loadedWorkflow{}
	}
	l.m[k] = loadedWorkflow{external, wf}
	return wf, nil
}
