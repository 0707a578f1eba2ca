package trust

// LookOptions describe a server entry a command that only looks (servers
// list, servers tools, validate --discover, shell completion) would start.
type LookOptions struct {
	// Workspace is the command's workspace directory.
	Workspace string
	// File is the file the entry was read from; "" for none (mcpflow's
	// own).
	File string
	// Named are the files the user named on the command line as servers
	// files (--servers FILE); "" entries are ignored.
	Named []string
	// Flag is --trust-workspace.
	Flag bool
	// Store is the user's trust store.
	Store *Store
}

// MayLook is the gate of commands that only look: whether one may start
// (or connect to) a server whose entry was read from o.File. Opening a
// directory must not run what its files say, so an entry read from a file
// inside the workspace starts only once the workspace is trusted (the
// store, or --trust-workspace) — unless the user named that very file on
// the command line (--servers FILE), a choice as explicit as `mcpflow run
// FILE`, as `claude --mcp-config FILE` treats it. Naming a file exempts
// that file alone: not the files it imports, not the workspace's other
// files; and it grants no workspace trust (the replay rule's gate stays
// as the store and the flag say). An entry from no file, or from a file
// outside the workspace (the user's own configuration), may start.
func MayLook(o LookOptions) bool {
	if o.File == "" || !Within(o.Workspace, o.File) || named(o.File, o.Named) {
		return true
	}
	ok, _ := Workspace(o.Store, o.Workspace, o.Flag)
	return ok
}

// named reports whether file is one of the files in names, compared as
// canonical paths (absolute, symbolic links resolved).
func named(file string, names []string) bool {
	canon := func(p string) string {
		if c, err := CanonicalPath(p); err == nil {
			return c
		}
		return p
	}
	f := canon(file)
	for _, n := range names {
		if n != "" && canon(n) == f {
			return true
		}
	}
	return false
}
