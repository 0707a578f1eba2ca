package demo

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// The demo server's resources, resource template and prompt (see the
// package documentation). Reads leave no ledger line: they change nothing.
const (
	notesURI    = "file:///demo/notes.txt"
	logoURI     = "file:///demo/logo.bin"
	greetingURI = "demo://greeting/{name}"
	reviewName  = "review"
)

// logo is the blob of logoURI: eight bytes, "AAECAwQFBgc=" in base64.
var logo = []byte{0, 1, 2, 3, 4, 5, 6, 7}

// notesText is the text of notesURI (and of the media tool's embedded
// text resource): eight lines, "note 1" to "note 8".
func notesText() string {
	var b strings.Builder
	for i := 1; i <= 8; i++ {
		fmt.Fprintf(&b, "note %d\n", i)
	}
	return b.String()
}

// readTargets are the names a fault may be aimed at besides the tools: the
// resources' URIs, the template and the prompt's name.
var readTargets = []string{notesURI, logoURI, greetingURI, reviewName}

// addReads registers the resources, the template and the prompt on s.
func (d *demo) addReads(s *mcp.Server) {
	s.AddResource(&mcp.Resource{URI: notesURI, Name: "notes.txt", Title: "Demo notes", Description: "Eight lines of notes.", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			if err := d.readFault(ctx, notesURI); err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: notesURI, MIMEType: "text/plain", Text: notesText()}}}, nil
		})
	s.AddResource(&mcp.Resource{URI: logoURI, Name: "logo.bin", Description: "Eight bytes of binary data.", MIMEType: "application/octet-stream", Size: int64(len(logo))},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			if err := d.readFault(ctx, logoURI); err != nil {
				return nil, err
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: logoURI, MIMEType: "application/octet-stream", Blob: logo}}}, nil
		})
	s.AddResourceTemplate(&mcp.ResourceTemplate{URITemplate: greetingURI, Name: "greeting", Description: "A greeting for name.", MIMEType: "text/plain"},
		func(ctx context.Context, req *mcp.ReadResourceRequest) (*mcp.ReadResourceResult, error) {
			if err := d.readFault(ctx, greetingURI); err != nil {
				return nil, err
			}
			uri := req.Params.URI
			name, err := url.PathUnescape(strings.TrimPrefix(uri, "demo://greeting/"))
			if err != nil || name == "" || strings.Contains(name, "/") {
				return nil, mcp.ResourceNotFoundError(uri)
			}
			return &mcp.ReadResourceResult{Contents: []*mcp.ResourceContents{{URI: uri, MIMEType: "text/plain", Text: "Hello, " + name + "!"}}}, nil
		})
	s.AddPrompt(&mcp.Prompt{Name: reviewName, Title: "Review a text", Description: "Ask for a review of a text.",
		Arguments: []*mcp.PromptArgument{
			{Name: "text", Description: "the text to review", Required: true},
			{Name: "focus", Description: "what to look at, e.g. tone"},
		}},
		func(ctx context.Context, req *mcp.GetPromptRequest) (*mcp.GetPromptResult, error) {
			if err := d.readFault(ctx, reviewName); err != nil {
				return nil, err
			}
			text, ok := req.Params.Arguments["text"]
			if !ok {
				// Invalid params: refused before anything ran.
				return nil, &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "prompt review: missing required argument text"}
			}
			ask := "Please review the following text"
			if focus := req.Params.Arguments["focus"]; focus != "" {
				ask += ", focusing on " + focus
			}
			return &mcp.GetPromptResult{
				Description: "A review of a text",
				Messages: []*mcp.PromptMessage{
					{Role: "user", Content: &mcp.TextContent{Text: ask + ":\n\n" + text}},
					{Role: "assistant", Content: &mcp.TextContent{Text: "I will review it."}},
				},
			}, nil
		})
}

// readFault is what a resources/read or prompts/get of target (a
// resource's URI, the template, the prompt's name) does before it answers:
// the delay, then the fault, only when Config.FaultTool names target — an
// empty FaultTool aims at every tool, not at reads. A read commits
// nothing: the -after-commit modes fire with no ledger line, and a drop
// exits (there is no connection of a read's own to drop).
func (d *demo) readFault(ctx context.Context, target string) error {
	if err := sleep(ctx, d.cfg.Delay); err != nil {
		return err
	}
	f := d.fault
	if f.kind == faultNone || d.cfg.FaultTool != target {
		return nil
	}
	if f.once {
		// The marker lives beside the ledger, which a read does not
		// create.
		if err := os.MkdirAll(filepath.Dir(d.marker), 0o700); err != nil {
			return fmt.Errorf("demo: fault marker: %w", err)
		}
		fired, err := fireOnce(d.marker)
		if err != nil || !fired {
			return err
		}
	}
	switch f.kind {
	case faultRPCError:
		return f.rpcError()
	case faultHang:
		select {
		case <-ctx.Done():
		case <-d.done:
		}
		return context.Canceled
	}
	exit(exitCode)
	return errExitIntercepted
}
