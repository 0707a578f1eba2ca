package main

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/journal"
)

// TestContentLines: every content type renders to something, the way the
// call and journal show goldens and the content script show it.
func TestContentLines(t *testing.T) {
	for _, tc := range []struct {
		name, content string
		want          []string
	}{
		{"text", `[{"type":"text","text":"one\ntwo"}]`, []string{"one", "two"}},
		{"image", `[{"type":"image","mimeType":"image/png","data":"` + strings.Repeat("A", 7068) + `"}]`, []string{"[image/png 5.3 KB]"}},
		{"image without a MIME type", `[{"type":"image","data":"AAAA"}]`, []string{"[image 3 B]"}},
		{"audio", `[{"type":"audio","mimeType":"audio/wav","data":"` + strings.Repeat("A", 16000) + `"}]`, []string{"[audio/wav 12 KB]"}},
		{"bad base64", `[{"type":"audio","mimeType":"audio/ogg","data":"AAAA!AAA"}]`, []string{"[audio/ogg 6 B]"}},
		{"link with title", `[{"type":"resource_link","uri":"file:///a.md","name":"a.md","title":"The A"}]`, []string{`[link file:///a.md "The A"]`}},
		{"link with name and type", `[{"type":"resource_link","uri":"file:///a.md","name":"a.md","mimeType":"text/markdown","size":999}]`, []string{`[link file:///a.md "a.md" text/markdown 999 B]`}},
		{"bare link", `[{"type":"resource_link","uri":"https://x.test/y"}]`, []string{`[link https://x.test/y]`}},
		{"five lines", `[{"type":"resource","resource":{"uri":"file:///f","text":"1\n2\n3\n4\n5\n"}}]`, []string{"[resource file:///f]", "  1", "  2", "  3", "  4", "  5"}},
		{"seven lines", `[{"type":"resource","resource":{"uri":"file:///f","mimeType":"text/plain","text":"1\n2\n3\n4\n5\n6\n7"}}]`,
			[]string{"[resource file:///f text/plain]", "  1", "  2", "  3", "  4", "  5", "  … 2 more lines"}},
		{"empty resource", `[{"type":"resource","resource":{"uri":"file:///e","mimeType":"text/plain","text":""}}]`, []string{"[resource file:///e text/plain]"}},
		{"blob", `[{"type":"resource","resource":{"uri":"file:///b","mimeType":"application/pdf","blob":"` + strings.Repeat("A", 2000) + `"}}]`,
			[]string{"[resource file:///b application/pdf]", "  [blob application/pdf 1.5 KB]"}},
		{"blob without a MIME type", `[{"type":"resource","resource":{"uri":"file:///b","blob":"AAAA"}}]`, []string{"[resource file:///b]", "  [blob application/octet-stream 3 B]"}},
		{"resource without contents", `[{"type":"resource"}]`, []string{"[resource]"}},
		{"unknown type", `[{"type":"ui_widget","html":"<b/>"}]`, []string{"[ui_widget content]"}},
		{"no type", `[{"text":"?"}]`, []string{"[untyped content]"}},
		{"not an object", `[42, {"type":"text","text":"after"}]`, []string{"42", "after"}},
		{"not kept", `{"truncated":true,"bytes":70000,"digest":"sha256:00"}`, []string{"[content of 70 KB not kept: over the journal's size limit]"}},
		{"none", ``, nil},
		{"null", `null`, nil},
	} {
		if got := contentLines(json.RawMessage(tc.content)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestByteSize(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 999: "999 B", 1000: "1.0 KB", 5300: "5.3 KB", 9949: "9.9 KB", 9950: "10 KB", 12000: "12 KB",
		999_499: "999 KB", 999_500: "1.0 MB", 1_500_000: "1.5 MB", 3_000_000_000: "3.0 GB", 5e15: "5000 TB",
	} {
		if got := byteSize(n); got != want {
			t.Errorf("byteSize(%d) = %q, want %q", n, got, want)
		}
	}
}

// TestPrintResult: call prints structured content when no text says it.
func TestPrintResult(t *testing.T) {
	for _, tc := range []struct {
		name string
		r    journal.Result
		want string
	}{
		{"text mirrors it", journal.Result{Content: json.RawMessage(`[{"type":"text","text":"Hello"}]`), StructuredContent: json.RawMessage(`{"g":"Hello"}`)}, "Hello\n"},
		{"only structured", journal.Result{Content: json.RawMessage(`[]`), StructuredContent: json.RawMessage(`{"rows":3}`)}, "{\"rows\":3}\n"},
		{"image and structured", journal.Result{Content: json.RawMessage(`[{"type":"image","mimeType":"image/gif","data":"AAAA"}]`), StructuredContent: json.RawMessage(`{"w":1}`)}, "[image/gif 3 B]\n{\"w\":1}\n"},
	} {
		var b bytes.Buffer
		printResult(&b, &tc.r)
		if b.String() != tc.want {
			t.Errorf("%s: printed %q, want %q", tc.name, b.String(), tc.want)
		}
	}
}

// TestReadLines: a read's contents are shown as embedded resources, a
// prompt's messages by role, and a result the journal did not keep says so.
func TestReadLines(t *testing.T) {
	for _, tc := range []struct {
		name       string
		m          journal.Method
		structured string
		want       []string
	}{
		{"text and blob", journal.MethodRead, `{"contents":[{"uri":"file:///n","mimeType":"text/plain","text":"a\nb"},{"uri":"file:///b","blob":"AAECAwQFBgc="}]}`,
			[]string{"[resource file:///n text/plain]", "  a", "  b", "[resource file:///b]", "  [blob application/octet-stream 8 B]"}},
		{"prompt", journal.MethodPrompt, `{"description":"d","messages":[{"role":"user","content":{"type":"text","text":"hi\nthere"}},{"role":"assistant","content":{"type":"image","mimeType":"image/png","data":"AAAA"}}]}`,
			[]string{"description: d", "user:", "  hi", "  there", "assistant:", "  [image/png 3 B]"}},
		{"prompt without a description", journal.MethodPrompt, `{"messages":[]}`, nil},
		{"not kept", journal.MethodRead, `{"truncated":true,"bytes":70000,"digest":"sha256:00"}`, []string{"[content of 70 KB not kept: over the journal's size limit]"}},
		{"none", journal.MethodRead, ``, nil},
	} {
		if got := readLines(tc.m, json.RawMessage(tc.structured)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, tc.want)
		}
	}
}
