package deps

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/mcpflow/mcpflow"

type pkg struct {
	ImportPath string
	Imports    []string // direct
	Deps       []string // transitive
}

// packages lists the module's packages with `go list`.
func packages(t *testing.T) map[string]pkg {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", module+"/...")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	all := map[string]pkg{}
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		all[strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")] = p
	}
	return all
}

// ours keeps the module's own packages of list, without the module prefix.
func ours(list []string) []string {
	var out []string
	for _, p := range list {
		if p == module || strings.HasPrefix(p, module+"/") {
			out = append(out, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
		}
	}
	return out
}

func internal(p string) bool { return strings.HasPrefix(p, "internal/") }

// TestPackageGraph is the design's package graph as a test:
//
//   - journal and replay import nothing of ours but internal/ leaf packages,
//     and replay nothing outside the standard library;
//   - sampling (the language model behind MCP sampling) imports nothing of
//     ours but internal/: it knows neither mcpflow.yaml nor the journal;
//   - internal/ packages are leaves: they import nothing of ours but other
//     internal/ packages;
//   - upstream, trust and workflow never depend on engine, service or cmd;
//   - engine never depends on service or cmd; service never on cmd;
//   - api (the JSON shapes) imports only journal and replay: every front end
//     can use it;
//   - httpapi (mcpflow server's HTTP API) never depends on cmd or client;
//   - mcpapi (mcpflow as an MCP server) works over service.API: it never
//     depends on httpapi, client, door, cmd or a storage engine (httpapi
//     may import it, to serve it at /mcp);
//   - proxy (mcpflow proxy) reaches the journal only through the engine
//     and the session service opens: it never depends on httpapi, client,
//     door, cmd, mcpapi or a storage engine;
//   - advice (the operator's commands, in the CLI's words) never depends on
//     a front end: not cmd, httpapi, client or mcpapi, which use it;
//   - client (the HTTP API's other end) never depends on httpapi: the wire
//     shapes are api's, the errors' codes service's;
//   - service never depends on httpapi or client: it owns the contract
//     (service.API) both sides implement (and only the two ends of the
//     engine's journal over the socket call journal.Relayed: see
//     TestOnlyTheJournalsEndsRelayIntents);
//   - telemetry (the OpenTelemetry and Prometheus wiring) imports only
//     journal and internal/: engine, upstream and journal reach it through
//     the otel global API and small hooks, never by importing it;
//   - nothing imports cmd.
func TestPackageGraph(t *testing.T) {
	all := packages(t)
	for _, must := range []string{"journal", "replay", "upstream", "trust", "workflow", "engine", "service", "telemetry", "sampling", "mcpapi", "advice", "proxy", "cmd/mcpflow"} {
		if _, ok := all[must]; !ok {
			t.Fatalf("package %s not found in %v", must, all)
		}
	}
	for name, p := range all {
		imports, deps := ours(p.Imports), ours(p.Deps)
		switch {
		case name == "journal" || name == "replay" || name == "sampling" || internal(name):
			for _, imp := range imports {
				if !internal(imp) {
					t.Errorf("%s imports %s: it may import only internal/ leaf packages", name, imp)
				}
			}
		}
		if name == "replay" {
			// The rule is pure: the standard library and internal/ only.
			for _, imp := range p.Imports {
				if first := strings.Split(imp, "/")[0]; strings.Contains(first, ".") && !strings.HasPrefix(imp, module+"/internal/") {
					t.Errorf("replay imports %s: it may import only the standard library and internal/ packages", imp)
				}
			}
		}
		forbidden := map[string][]string{
			"upstream":  {"engine", "service", "cmd/mcpflow", "trust", "workflow", "telemetry"},
			"trust":     {"engine", "service", "cmd/mcpflow", "workflow"},
			"workflow":  {"engine", "service", "cmd/mcpflow", "trust"},
			"engine":    {"service", "cmd/mcpflow", "telemetry"},
			"journal":   {"telemetry"},
			"telemetry": {"engine", "service", "httpapi", "upstream", "workflow", "trust", "cmd/mcpflow"},
			"service":   {"cmd/mcpflow", "httpapi", "client"},
			"httpapi":   {"cmd/mcpflow", "client"},
			"mcpapi":    {"cmd/mcpflow", "httpapi", "client", "door", "journal/bolt", "journal/postgres"},
			"proxy":     {"cmd/mcpflow", "httpapi", "client", "door", "mcpapi", "journal/bolt", "journal/postgres"},
			"advice":    {"cmd/mcpflow", "httpapi", "client", "mcpapi", "door", "journal/bolt", "journal/postgres"},
			"client":    {"cmd/mcpflow", "httpapi"},
		}
		if name == "api" {
			for _, imp := range imports {
				if imp != "journal" && imp != "replay" && imp != "elicit" && !internal(imp) {
					t.Errorf("api imports %s: it may import only journal, replay and elicit", imp)
				}
			}
		}
		for _, f := range forbidden[strings.Split(name, "/")[0]] {
			if slices.Contains(deps, f) && !strings.HasPrefix(name, f) {
				t.Errorf("%s depends on %s", name, f)
			}
		}
		for _, imp := range imports {
			if strings.HasPrefix(imp, "cmd/") {
				t.Errorf("%s imports %s: nothing imports a command", name, imp)
			}
		}
	}
}

// TestStorageEnginesStayBehindTheDoor: journal holds the vocabulary and
// the contract, journal/bolt and journal/postgres the storage engines.
// An engine imports journal and internal/ only (never the other engine);
// only door (which opens the engine a location names) and journaltest
// import an engine; and the packages that need only the vocabulary link
// neither bbolt nor pgx.
func TestStorageEnginesStayBehindTheDoor(t *testing.T) {
	all := packages(t)
	engines := []string{"journal/bolt", "journal/postgres"}
	for name, p := range all {
		for _, imp := range ours(p.Imports) {
			if slices.Contains(engines, name) && imp != "journal" && !internal(imp) {
				t.Errorf("%s imports %s: a storage engine may import only journal and internal/", name, imp)
			}
			if slices.Contains(engines, imp) && name != "door" && name != "journal/journaltest" {
				t.Errorf("%s imports %s: only door opens a storage engine", name, imp)
			}
		}
	}
	for _, name := range []string{"journal", "api", "trust", "workflow", "replay", "upstream", "mcpapi", "advice", "proxy"} {
		p, ok := all[name]
		if !ok {
			t.Fatalf("package %s not found", name)
		}
		for _, dep := range p.Deps {
			if dep == "go.etcd.io/bbolt" || strings.HasPrefix(dep, "github.com/jackc/pgx") {
				t.Errorf("%s links %s: it needs only the journal's vocabulary", name, dep)
			}
		}
	}
}

// TestCommandsSpeakTheContract: cmd/mcpflow holds flags, prompts and
// printing; it reaches the journal through service.API. It imports
// neither httpapi nor a storage engine: door opens the journal a location
// names and starts the HTTP server (for mcpflow server, and for a command
// that holds the journal and serves it meanwhile). Only command_root.go
// and owner.go find the client.
func TestCommandsSpeakTheContract(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/cmd/mcpflow").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var p struct {
		Dir     string
		GoFiles []string
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	allowed := map[string][]string{
		module + "/httpapi":          nil, // door starts it
		module + "/journal/bolt":     nil, // door opens the engines
		module + "/journal/postgres": nil,
		module + "/client":           {"command_root.go", "owner.go"},
	}
	fset := token.NewFileSet()
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			if files, ok := allowed[path]; ok && !slices.Contains(files, name) {
				t.Errorf("cmd/mcpflow/%s imports %s: only %v may", name, path, files)
			}
		}
	}
}

// TestOnlyTheJournalsEndsRelayIntents: journal.Relayed makes an Intent
// Valid, the proof engine.MCP asks for before it sends a tools/call that
// its intent is durable. Only the two ends of a journal another process
// holds call it: the journal's client (client/journal.go, on an Intent
// the owner answered after its durable Begin or Again) and the owner's
// API (httpapi/journal.go, on the Intent sent back with Finish, which the
// journal checks against the open attempt). Tests may.
func TestOnlyTheJournalsEndsRelayIntents(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", module+"/...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	allowed := []string{"client/journal.go", "httpapi/journal.go"}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	fset := token.NewFileSet()
	found := 0
	for {
		var p struct {
			ImportPath string
			Dir        string
			GoFiles    []string
		}
		if err := dec.Decode(&p); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkg := strings.TrimPrefix(strings.TrimPrefix(p.ImportPath, module), "/")
		if pkg == "journal" {
			continue // where it is defined
		}
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			local := "" // the name journal is imported as in f
			for _, imp := range f.Imports {
				if strings.Trim(imp.Path.Value, `"`) == module+"/journal" {
					local = "journal"
					if imp.Name != nil {
						local = imp.Name.Name
					}
				}
			}
			if local == "" {
				continue
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "Relayed" {
					return true
				}
				if x, ok := sel.X.(*ast.Ident); ok && x.Name == local {
					if file := pkg + "/" + name; !slices.Contains(allowed, file) {
						t.Errorf("%s: %s calls journal.Relayed: only %v may (it forges the proof that an intent is durable)", fset.Position(sel.Pos()), file, allowed)
					} else {
						found++
					}
				}
				return true
			})
		}
	}
	if found == 0 {
		t.Error("journal.Relayed is called nowhere: is the test looking at the right name?")
	}
}
