package main

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/mcpflow/mcpflow/upstream"
)

// installCase is a client's file and what mcpflow --install prints for it.
type installCase struct {
	name   string
	client string
	// file is where the config goes: relative to the workspace, or to the
	// home directory when it starts with "~/". configFlag names it with
	// --config instead of letting the client's place be found.
	file       string
	configFlag bool
	config     string
	yaml       string   // the workspace's mcpflow.yaml; "" for none
	secrets    []string // never printed
}

var installCases = []installCase{{
	name: "claude-desktop", client: "claude-desktop", file: "~/claude_desktop_config.json", configFlag: true,
	secrets: []string{"ghp_TOPSECRET123", "sk-HEADERSECRET456"},
	config: `{
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "github": {
      "command": "npx",
      "args": ["-y", "@modelcontextprotocol/server-github"],
      "env": {
        "GITHUB_PERSONAL_ACCESS_TOKEN": "ghp_TOPSECRET123"
      }
    },
    "memory": {"command": "mcpflow", "args": ["--workspace", "/elsewhere", "proxy", "memory"]},
    "linear": {"url": "https://mcp.linear.app/mcp", "headers": {"Authorization": "Bearer sk-HEADERSECRET456"}},
    "broken": {"args": ["only", "args"]}
  }
}
`,
}, {
	name: "claude-code", client: "claude-code", file: ".mcp.json",
	yaml: "import: [.mcp.json]\nservers:\n  db: {command: db-mcp, args: ['--dsn', '${DB_DSN}']}\n",
	config: `{
	"mcpServers": {
		"db": {"type": "stdio", "command": "db-mcp", "args": ["--dsn", "${DB_DSN}"]},
		"api": {"type": "http", "url": "https://api.example.com/mcp", "headers": {"Authorization": "Bearer ${API_TOKEN}"}},
		"notes": {"command": "notes-mcp", "env": {"NOTES_KEY": "n0tes-s3cret"}}
	}
}
`,
	secrets: []string{"n0tes-s3cret"},
}, {
	name: "vscode-jsonc", client: "vscode", file: ".vscode/mcp.json",
	secrets: []string{"hunter2-not-a-var"},
	config: `// MCP servers of this project
{
  "inputs": [
    {"type": "promptString", "id": "api-key", "description": "API key", "password": true},
  ],
  "servers": {
    // the team's search server
    "search": {
      "type": "stdio",
      "command": "node",
      "args": ["${workspaceFolder}/search/index.js"], // built by make
      "env": {"SEARCH_KEY": "${input:api-key}", "DB_PASSWORD": "hunter2-not-a-var"},
    },
    /* an SSE server */
    "events": {"type": "sse", "url": "https://events.example.com/sse"},
  },
}
`,
}, {
	name: "gemini", client: "gemini", file: "~/.gemini/settings.json",
	config: `{
  "theme": "GitHub",
  "mcpServers": {
    "weather": {"httpUrl": "https://weather.example.com/mcp", "headers": {"X-Api-Key": "$WEATHER_KEY"}, "timeout": 30000, "trust": true},
    "cloud": {"httpUrl": "https://cloud.example.com/mcp", "authProviderType": "google_credentials"}
  }
}
`,
}, {
	name: "claude-code-user", client: "claude-code", file: "~/.claude.json",
	secrets: []string{"sk-ant-PRIMARYKEY", "local-secret-789"},
	config: `{
  "primaryApiKey": "sk-ant-PRIMARYKEY",
  "mcpServers": {"memory": {"type": "stdio", "command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory"], "env": {}}},
  "projects": {
    "$WS": {
      "mcpServers": {"tickets": {"type": "stdio", "command": "tickets-mcp", "args": [], "env": {"TICKETS_TOKEN": "local-secret-789"}}}
    }
  }
}
`,
}, {
	name: "all-proxied", client: "cursor", file: ".cursor/mcp.json",
	config: `{"mcpServers": {"notion": {"command": "/opt/bin/mcpflow", "args": ["proxy", "notion"]}}}` + "\n",
}}

// setUpInstall writes the case's files in a new workspace and home, and
// returns the workspace and the config file.
// "$WS" in the config is the workspace.
func setUpInstall(t *testing.T, c installCase) (ws, file string) {
	t.Helper()
	ws, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	file = filepath.Join(ws, c.file)
	if rest, ok := strings.CutPrefix(c.file, "~/"); ok {
		file = filepath.Join(home, rest)
	}
	write := func(path, text string) {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c.config = strings.ReplaceAll(c.config, "$WS", ws)
	write(file, c.config)
	if c.yaml != "" {
		write(filepath.Join(ws, upstream.WorkspaceFile), c.yaml)
	}
	return ws, file
}

// installPaths replaces the machine's paths in the output.
func installPaths(t *testing.T, out, ws string) string {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	out = strings.ReplaceAll(out, exe, "$MCPFLOW")
	out = strings.ReplaceAll(out, ws, "$WS")
	out = strings.ReplaceAll(out, os.Getenv("HOME"), "$HOME")
	// The test binary runs from a temporary directory.
	return strings.Replace(out, "Note: this mcpflow runs from a temporary directory (go run?): install it, then run this again.\n\n", "", 1)
}

// TestPrintInstall: for each client's format, what --install prints
// (against testdata/install/NAME.golden): the servers, mcpflow.yaml's
// entries, the diff and how to apply them; never a secret of the file;
// and the file is left as it was.
func TestPrintInstall(t *testing.T) {
	for _, c := range installCases {
		t.Run(c.name, func(t *testing.T) {
			ws, file := setUpInstall(t, c)
			c.config = strings.ReplaceAll(c.config, "$WS", ws)
			config := ""
			if c.configFlag {
				config = file
			}
			var out bytes.Buffer
			if err := printInstall(t.Context(), &globals{workspace: ws}, &out, c.client, config); err != nil {
				t.Fatal(err)
			}
			for _, s := range c.secrets {
				if strings.Contains(out.String(), s) {
					t.Errorf("the output shows the secret %q", s)
				}
			}
			if b, err := os.ReadFile(file); err != nil || string(b) != c.config {
				t.Errorf("the config file changed (%v)", err)
			}
			checkInstallGolden(t, c.name, installPaths(t, out.String(), ws))
		})
	}
}

func checkInstallGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", "install", name+".golden")
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestPrintInstallErrors: an unknown client lists the known ones; a
// client without a configuration says where it looked; both are usage
// errors.
func TestPrintInstallErrors(t *testing.T) {
	ws, home := t.TempDir(), t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(home, ".config"))
	for _, tc := range []struct{ client, want string }{
		{"claude-destkop", `--install: unknown client "claude-destkop" (did you mean "claude-desktop"? known: claude-desktop, claude-code, cursor, vscode, gemini, qwen)`},
		{"emacs", `--install: unknown client "emacs" (known: claude-desktop, claude-code, cursor, vscode, gemini, qwen)`},
		{"cursor", "no Cursor configuration found (looked for " + filepath.Join(ws, ".cursor", "mcp.json") + ", " + filepath.Join(home, ".cursor", "mcp.json") + "; name it with --config FILE)"},
	} {
		err := printInstall(t.Context(), &globals{workspace: ws}, &bytes.Buffer{}, tc.client, "")
		if err == nil || err.Error() != tc.want || codeFor(err) != exitUsage {
			t.Errorf("%s: %v (exit %d), want %s (exit %d)", tc.client, err, codeFor(err), tc.want, exitUsage)
		}
	}
	if !errors.Is(printInstall(t.Context(), &globals{workspace: ws}, &bytes.Buffer{}, "vscode", filepath.Join(ws, "absent.json")), os.ErrNotExist) {
		t.Error("--config naming a missing file: want a not-exist error")
	}
}

// TestPrintInstallCommand runs printInstall under the root command, as
// mcpflow proxy --install will, through a hidden command of this test
// only: --workspace decides the workspace of the new entries.
func TestPrintInstallCommand(t *testing.T) {
	c := installCases[0]
	ws, file := setUpInstall(t, c)
	g := &globals{}
	root := newRootCommand(g)
	var config string
	hidden := &cobra.Command{
		Use: "install-test CLIENT", Hidden: true, Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return printInstall(cmd.Context(), g, cmd.OutOrStdout(), args[0], config)
		},
	}
	hidden.Flags().StringVar(&config, "config", "", "")
	root.AddCommand(hidden)
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"--workspace", ws, "install-test", "claude-desktop", "--config", file})
	if err := root.ExecuteContext(t.Context()); err != nil {
		t.Fatal(err)
	}
	want := `"args": ["--workspace", "` + ws + `", "proxy", "github"]`
	if !strings.Contains(out.String(), want) {
		t.Errorf("the output lacks %s:\n%s", want, out.String())
	}
}
