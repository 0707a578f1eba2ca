package upstream

import (
	"encoding/binary"
	"runtime"
	"slices"
	"sync"
	"weak"
)

// toolList is a server's tools as one session listed them. Sessions whose
// listings are the same, byte for byte, share one (sharedTools): a server
// holding many runs, each with a session of its own to the same server,
// keeps one copy of the list, not one per run. It is never changed once
// made.
type toolList struct {
	tools map[string]Tool
}

// toolLists are the lists in use, by content (toolsKey). An entry goes
// once no session holds its list.
var toolLists = struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[toolList]
}{m: map[string]weak.Pointer[toolList]{}}

// sharedTools returns the list in use with the same content as tools, or
// a new one holding tools.
func sharedTools(tools map[string]Tool) *toolList {
	key := toolsKey(tools)
	toolLists.mu.Lock()
	defer toolLists.mu.Unlock()
	if l := toolLists.m[key].Value(); l != nil {
		return l
	}
	l := &toolList{tools: tools}
	toolLists.m[key] = weak.Make(l)
	runtime.AddCleanup(l, forgetToolList, key)
	return l
}

// forgetToolList drops the entry of key once its list is gone (unless a
// new list took its place).
func forgetToolList(key string) {
	toolLists.mu.Lock()
	defer toolLists.mu.Unlock()
	if wp, ok := toolLists.m[key]; ok && wp.Value() == nil {
		delete(toolLists.m, key)
	}
}

// toolsKey is the content of tools as one string: every field of every
// tool, in the order of the names, each with its length before it, so
// that two lists have the same key only when they are the same.
func toolsKey(tools map[string]Tool) string {
	names := make([]string, 0, len(tools))
	size := 0
	for n, t := range tools {
		names = append(names, n)
		size += len(n) + len(t.Name) + len(t.Description) + len(t.Annotations) + len(t.InputSchema) + len(t.OutputSchema) + 6*binary.MaxVarintLen64 + 3
	}
	slices.Sort(names)
	b := make([]byte, 0, size)
	field := func(v []byte, null bool) {
		if null {
			b = append(b, 0) // nil and empty differ (an annotation absent, or sent empty)
		} else {
			b = append(b, 1)
		}
		b = binary.AppendUvarint(b, uint64(len(v)))
		b = append(b, v...)
	}
	for _, n := range names {
		t := tools[n]
		field([]byte(n), false)
		field([]byte(t.Name), false)
		field([]byte(t.Description), false)
		field(t.Annotations, t.Annotations == nil)
		field(t.InputSchema, t.InputSchema == nil)
		field(t.OutputSchema, t.OutputSchema == nil)
	}
	return string(b)
}
