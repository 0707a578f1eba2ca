package demo

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// TestReads reads every resource and gets the prompt: reads leave no
// ledger line.
func TestReads(t *testing.T) {
	ledgerPath := testLedger(t)
	cs, _ := connect(t, Config{Ledger: ledgerPath}, nil)
	ctx := context.Background()
	for uri, want := range map[string]string{
		notesURI:                `[{"uri":"file:///demo/notes.txt","mimeType":"text/plain","text":"note 1\nnote 2\nnote 3\nnote 4\nnote 5\nnote 6\nnote 7\nnote 8\n"}]`,
		logoURI:                 `[{"uri":"file:///demo/logo.bin","mimeType":"application/octet-stream","blob":"AAECAwQFBgc="}]`,
		"demo://greeting/Grace": `[{"uri":"demo://greeting/Grace","mimeType":"text/plain","text":"Hello, Grace!"}]`,
		"demo://greeting/a%2Fb": "",
		"demo://greeting/":      "",
		"file:///demo/notes.md": "",
	} {
		res, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: uri})
		if want == "" {
			if err == nil {
				t.Errorf("read %s: %+v, want resource not found", uri, res.Contents)
			}
			continue
		}
		if err != nil {
			t.Errorf("read %s: %v", uri, err)
			continue
		}
		if b, _ := json.Marshal(res.Contents); string(b) != want {
			t.Errorf("read %s: %s, want %s", uri, b, want)
		}
	}
	res, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: reviewName, Arguments: map[string]string{"text": "x"}})
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(res.Messages); res.Description != "A review of a text" || string(b) != `[{"content":{"type":"text","text":"Please review the following text:\n\nx"},"role":"user"},{"content":{"type":"text","text":"I will review it."},"role":"assistant"}]` {
		t.Errorf("review: %s", b)
	}
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: reviewName}); err == nil {
		t.Error("review without text: no error")
	}
	if n := len(readLedger(t, ledgerPath)); n != 0 {
		t.Errorf("reads left %d ledger rows", n)
	}
}

// TestFaultOnRead: a fault aimed at a resource fires on its reads only,
// once with a -once mode, and never on a read when it is aimed at every
// tool.
func TestFaultOnRead(t *testing.T) {
	exits := interceptExit(t)
	ledgerPath := testLedger(t)
	ctx := context.Background()
	cs, _ := connect(t, Config{Ledger: ledgerPath, Fault: "exit-after-commit"}, nil)
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: notesURI}); err != nil || len(exits()) != 0 {
		t.Fatalf("a fault aimed at every tool fired on a read: %v, exits %v", err, exits())
	}
	cs, _ = connect(t, Config{Ledger: ledgerPath, Fault: "exit-after-commit-once", FaultTool: notesURI}, nil)
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: logoURI}); err != nil {
		t.Fatalf("read of another resource: %v", err)
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: notesURI}); err == nil {
		t.Error("the faulted read answered")
	}
	if _, err := cs.ReadResource(ctx, &mcp.ReadResourceParams{URI: notesURI}); err != nil {
		t.Errorf("the read after a -once fault fired: %v", err)
	}
	if got := exits(); !slices.Equal(got, []int{17}) {
		t.Errorf("exit codes %v, want [17]", got)
	}
	if _, err := os.Stat(ledgerPath + ".fault-fired"); err != nil {
		t.Errorf("marker: %v", err)
	}
	cs, _ = connect(t, Config{Ledger: testLedger(t), Fault: "rpc-error-after-commit", FaultTool: reviewName}, nil)
	if _, err := cs.GetPrompt(ctx, &mcp.GetPromptParams{Name: reviewName, Arguments: map[string]string{"text": "x"}}); err == nil {
		t.Error("the faulted get answered")
	}
	if _, err := newDemo(Config{Fault: "exit-after-commit", FaultTool: greetingURI}); err != nil {
		t.Errorf("a fault aimed at the template: %v", err)
	}
}
