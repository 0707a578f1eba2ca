package sampling_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mcpflow/mcpflow/sampling"
)

// stub is an OpenAI-compatible chat-completions server: it records each
// request it gets and answers with reply (or with status and body).
type stub struct {
	*httptest.Server
	mu     sync.Mutex
	got    []received
	status int    // 0: 200
	reply  string // the body to answer with
	hang   bool   // never answer (until the request is cancelled)
}

type received struct {
	method, path, auth string
	body               map[string]any
}

func newStub(t *testing.T, reply string) *stub {
	t.Helper()
	s := &stub{reply: reply}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		var body map[string]any
		json.Unmarshal(b, &body)
		s.mu.Lock()
		s.got = append(s.got, received{r.Method, r.URL.Path, r.Header.Get("Authorization"), body})
		status, reply, hang := s.status, s.reply, s.hang
		s.mu.Unlock()
		if hang {
			<-r.Context().Done()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		if status != 0 {
			w.WriteHeader(status)
		}
		io.WriteString(w, reply)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *stub) requests() []received {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]received(nil), s.got...)
}

const okReply = `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"stub-model-7b",
	"choices":[{"index":0,"message":{"role":"assistant","content":"Paris, in one word."},"finish_reason":"stop"}],
	"usage":{"prompt_tokens":9,"completion_tokens":4,"total_tokens":13}}`

const secretKey = "sk-test-0123456789abcdef"

func newProvider(t *testing.T, s *stub, o sampling.Options) *sampling.Provider {
	t.Helper()
	o.BaseURL = s.URL + "/v1"
	if o.Model == "" {
		o.Model = "llama3.2"
	}
	p, err := sampling.New(&o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func textMessage(role mcp.Role, text string) *mcp.SamplingMessage {
	return &mcp.SamplingMessage{Role: role, Content: &mcp.TextContent{Text: text}}
}

func TestCreateMessage(t *testing.T) {
	s := newStub(t, okReply)
	p := newProvider(t, s, sampling.Options{APIKey: secretKey})
	res, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{
		SystemPrompt: "You answer in one word.",
		Messages: []*mcp.SamplingMessage{
			textMessage("user", "Capital of France?"),
			textMessage("assistant", "Which country?"),
			textMessage("user", "France."),
		},
		MaxTokens:        64,
		Temperature:      0.25,
		StopSequences:    []string{"\n\n"},
		ModelPreferences: &mcp.ModelPreferences{Hints: []*mcp.ModelHint{{Name: "claude-opus"}}},
		IncludeContext:   "thisServer",
		Metadata:         map[string]any{"trace": "not forwarded"},
	})
	if err != nil {
		t.Fatal(err)
	}
	got := s.requests()
	if len(got) != 1 {
		t.Fatalf("%d requests, want 1", len(got))
	}
	r := got[0]
	if r.method != "POST" || r.path != "/v1/chat/completions" || r.auth != "Bearer "+secretKey {
		t.Errorf("request %s %s, Authorization %q", r.method, r.path, r.auth)
	}
	b, _ := json.Marshal(r.body)
	var body struct {
		Model    string `json:"model"`
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		MaxTokens   *int     `json:"max_tokens"`
		Temperature float64  `json:"temperature"`
		Stop        []string `json:"stop"`
		Stream      bool     `json:"stream"`
	}
	if err := json.Unmarshal(b, &body); err != nil {
		t.Fatal(err)
	}
	// The configured model, whatever the server's hints.
	if body.Model != "llama3.2" || body.MaxTokens == nil || *body.MaxTokens != 64 || body.Temperature != 0.25 ||
		len(body.Stop) != 1 || body.Stop[0] != "\n\n" || body.Stream {
		t.Errorf("body %s", b)
	}
	want := [][2]string{{"system", "You answer in one word."}, {"user", "Capital of France?"}, {"assistant", "Which country?"}, {"user", "France."}}
	if len(body.Messages) != len(want) {
		t.Fatalf("messages %s", b)
	}
	for i, m := range body.Messages {
		if m.Role != want[i][0] || m.Content != want[i][1] {
			t.Errorf("messages[%d] = %s %q, want %s %q", i, m.Role, m.Content, want[i][0], want[i][1])
		}
	}
	for _, k := range []string{"metadata", "max_completion_tokens", "tools", "user"} {
		if _, ok := r.body[k]; ok {
			t.Errorf("body has %s: %s", k, b)
		}
	}
	if res.Role != "assistant" || res.Model != "stub-model-7b" || res.StopReason != "endTurn" {
		t.Errorf("result %+v", res)
	}
	if tc, ok := res.Content.(*mcp.TextContent); !ok || tc.Text != "Paris, in one word." {
		t.Errorf("content %#v", res.Content)
	}
}

func TestCreateMessageWithoutKeySendsNoAuthorization(t *testing.T) {
	s := newStub(t, okReply)
	p := newProvider(t, s, sampling.Options{})
	if _, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{textMessage("user", "hi")}}); err != nil {
		t.Fatal(err)
	}
	got := s.requests()
	if len(got) != 1 || got[0].auth != "" {
		t.Fatalf("requests %+v", got)
	}
	if _, ok := got[0].body["max_tokens"]; ok {
		t.Errorf("max_tokens sent for maxTokens 0: %v", got[0].body)
	}
}

func TestReasoningModelGetsMaxCompletionTokens(t *testing.T) {
	s := newStub(t, okReply)
	p := newProvider(t, s, sampling.Options{Model: "o3-mini"})
	if _, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{MaxTokens: 50, Messages: []*mcp.SamplingMessage{textMessage("user", "hi")}}); err != nil {
		t.Fatal(err)
	}
	body := s.requests()[0].body
	if body["max_completion_tokens"] != 50.0 || body["max_tokens"] != nil {
		t.Errorf("body %v", body)
	}
}

func TestResultModelAndStopReason(t *testing.T) {
	for _, tc := range []struct {
		finish, want string
	}{
		{"stop", "endTurn"}, {"length", "maxTokens"}, {"tool_calls", "toolUse"}, {"function_call", "toolUse"},
		{"content_filter", "contentFilter"}, {"", ""}, {"eos_token", "eos_token"},
	} {
		t.Run(tc.finish, func(t *testing.T) {
			if got := sampling.StopReason(tc.finish); got != tc.want {
				t.Errorf("StopReason(%q) = %q, want %q", tc.finish, got, tc.want)
			}
		})
	}
	// A reply that names no model is the configured model's; an empty
	// content with a refusal gives the refusal.
	s := newStub(t, `{"choices":[{"message":{"role":"assistant","content":"","refusal":"I cannot help with that."},"finish_reason":"length"}]}`)
	p := newProvider(t, s, sampling.Options{Model: "qwen2.5"})
	res, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{textMessage("user", "hi")}})
	if err != nil {
		t.Fatal(err)
	}
	if tc, ok := res.Content.(*mcp.TextContent); res.Model != "qwen2.5" || res.StopReason != "maxTokens" || !ok || tc.Text != "I cannot help with that." {
		t.Errorf("result %+v, content %#v", res, res.Content)
	}
}

func TestImages(t *testing.T) {
	s := newStub(t, okReply)
	p := newProvider(t, s, sampling.Options{})
	_, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{
		{Role: "user", Content: &mcp.ImageContent{MIMEType: "image/png", Data: []byte("\x89PNG")}},
	}})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(s.requests()[0].body["messages"])
	if want := `[{"content":[{"image_url":{"url":"data:image/png;base64,iVBORw=="},"type":"image_url"}],"role":"user"}]`; string(b) != want {
		t.Errorf("messages %s\nwant     %s", b, want)
	}
}

func TestUnsupportedContentSendsNothing(t *testing.T) {
	s := newStub(t, okReply)
	p := newProvider(t, s, sampling.Options{APIKey: secretKey})
	for name, m := range map[string]*mcp.SamplingMessage{
		"audio":           {Role: "user", Content: &mcp.AudioContent{MIMEType: "audio/wav", Data: []byte("RIFF")}},
		"assistant image": {Role: "assistant", Content: &mcp.ImageContent{MIMEType: "image/png", Data: []byte("x")}},
		"odd image type":  {Role: "user", Content: &mcp.ImageContent{MIMEType: "text/html", Data: []byte("x")}},
		"tool use":        {Role: "assistant", Content: &mcp.ToolUseContent{ID: "1", Name: "t"}},
		"bad role":        {Role: "system", Content: &mcp.TextContent{Text: "secret words"}},
		"no content":      {Role: "user"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{MaxTokens: 10, Messages: []*mcp.SamplingMessage{textMessage("user", "secret words"), m}})
			if !errors.Is(err, sampling.ErrUnsupportedContent) || !strings.Contains(err.Error(), "messages[1]") {
				t.Fatalf("err = %v, want ErrUnsupportedContent at messages[1]", err)
			}
			if strings.Contains(err.Error(), "secret words") {
				t.Errorf("error holds the request's text: %v", err)
			}
		})
	}
	if _, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{}); !errors.Is(err, sampling.ErrUnsupportedContent) {
		t.Errorf("no messages: %v", err)
	}
	if n := len(s.requests()); n != 0 {
		t.Errorf("%d requests sent", n)
	}
}

// TestErrorsHoldNoSecret: whatever the provider writes in its error body
// (the key, the prompt), the error says the status, type and code only.
func TestErrorsHoldNoSecret(t *testing.T) {
	const prompt = "the launch codes are 0000"
	for _, tc := range []struct {
		name   string
		status int
		body   string
		want   []string
	}{
		{"unauthorized", 401, `{"error":{"message":"Incorrect API key provided: ` + secretKey + ` for ` + prompt + `","type":"invalid_request_error","code":"invalid_api_key"}}`,
			[]string{"401 Unauthorized", "invalid_request_error, invalid_api_key", "refused the API key"}},
		{"not found", 404, `{"error":{"message":"model \"llama3.2\" not found, try pulling it first: ` + prompt + `","type":"api_error"}}`,
			[]string{"404 Not Found", "(api_error)", `no model "llama3.2"`}},
		{"rate limited", 429, `{"error":{"message":"` + prompt + `","type":"requests","code":429}}`,
			[]string{"429 Too Many Requests", "(requests, 429)", "rate limited"}},
		{"not json", 500, `<html>` + prompt + secretKey + `</html>`, []string{"500 Internal Server Error"}},
		{"odd type", 400, `{"error":{"message":"x","type":"` + prompt + `"}}`, []string{"400 Bad Request"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newStub(t, tc.body)
			s.status = tc.status
			p := newProvider(t, s, sampling.Options{APIKey: secretKey})
			_, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{textMessage("user", prompt)}})
			var pe *sampling.ProviderError
			if !errors.Is(err, sampling.ErrProvider) || !errors.As(err, &pe) || pe.Status != tc.status {
				t.Fatalf("err = %v, want a ProviderError with status %d", err, tc.status)
			}
			msg := err.Error()
			for _, w := range tc.want {
				if !strings.Contains(msg, w) {
					t.Errorf("error %q lacks %q", msg, w)
				}
			}
			for _, secret := range []string{secretKey, "0123456789", prompt, "launch"} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q holds %q", msg, secret)
				}
			}
		})
	}
}

func TestBadReplies(t *testing.T) {
	defer sampling.SetReplyLimit(1000)()
	for name, body := range map[string]string{
		"no choices": `{"model":"m","choices":[]}`,
		"not json":   `Paris`,
		"cut short":  `{"choices":[{"message":`,
		"too large":  `{"choices":[{"message":{"role":"assistant","content":"` + strings.Repeat("a", 1000) + `"}}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			s := newStub(t, body)
			p := newProvider(t, s, sampling.Options{})
			_, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{textMessage("user", "hi")}})
			if !errors.Is(err, sampling.ErrBadReply) {
				t.Fatalf("err = %v, want ErrBadReply", err)
			}
			if len(err.Error()) > 300 {
				t.Errorf("error of %d bytes", len(err.Error()))
			}
		})
	}
}

// TestReplyOfExactlyTheLimit: the bound is inclusive.
func TestReplyOfExactlyTheLimit(t *testing.T) {
	defer sampling.SetReplyLimit(int64(len(okReply)))()
	s := newStub(t, okReply)
	p := newProvider(t, s, sampling.Options{})
	if _, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{textMessage("user", "hi")}}); err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutAndCancel(t *testing.T) {
	s := newStub(t, okReply)
	s.hang = true
	p := newProvider(t, s, sampling.Options{Timeout: 100 * time.Millisecond})
	params := &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{textMessage("user", "hi")}}
	start := time.Now()
	_, err := p.CreateMessage(context.Background(), params)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "within 100ms") {
		t.Fatalf("err = %v, want a deadline within 100ms", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("took %s", d)
	}

	p = newProvider(t, s, sampling.Options{})
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(50*time.Millisecond, cancel)
	if _, err := p.CreateMessage(ctx, params); !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestUnreachable(t *testing.T) {
	s := newStub(t, okReply)
	p := newProvider(t, s, sampling.Options{APIKey: secretKey})
	s.Close()
	_, err := p.CreateMessage(context.Background(), &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{textMessage("user", "hi")}})
	if !errors.Is(err, sampling.ErrUnreachable) || strings.Contains(err.Error(), secretKey) || strings.Contains(err.Error(), "/chat/completions") {
		t.Fatalf("err = %v", err)
	}
}

// TestRedirectIsNotFollowed: a redirect would send the prompt a second
// time, to wherever it points.
func TestRedirectIsNotFollowed(t *testing.T) {
	target := newStub(t, okReply)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	defer redirect.Close()
	p, err := sampling.New(&sampling.Options{BaseURL: redirect.URL + "/v1", Model: "m", APIKey: secretKey})
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.CreateMessage(context.Background(), &mcp.CreateMessageParams{Messages: []*mcp.SamplingMessage{textMessage("user", "hi")}})
	if !errors.Is(err, sampling.ErrUnreachable) || !strings.Contains(err.Error(), "redirected to "+target.URL) {
		t.Fatalf("err = %v", err)
	}
	if n := len(target.requests()); n != 0 {
		t.Errorf("the redirect's target got %d requests", n)
	}
}

func TestNewChecksOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		o    *sampling.Options
		want string
	}{
		{"nil", nil, "no options"},
		{"no base url", &sampling.Options{Model: "m"}, "no base URL"},
		{"scheme", &sampling.Options{BaseURL: "ftp://h/v1", Model: "m"}, "not http or https"},
		{"no host", &sampling.Options{BaseURL: "http:///v1", Model: "m"}, "has no host"},
		{"query", &sampling.Options{BaseURL: "http://h/v1?key=" + secretKey, Model: "m"}, "query or a fragment"},
		{"user info", &sampling.Options{BaseURL: "https://me:" + secretKey + "@h/v1", Model: "m"}, "user name or password"},
		{"no model", &sampling.Options{BaseURL: "http://h/v1", Model: " "}, "no model"},
		{"negative timeout", &sampling.Options{BaseURL: "http://h/v1", Model: "m", Timeout: -time.Second}, "negative timeout"},
		{"key with newline", &sampling.Options{BaseURL: "http://h/v1", Model: "m", APIKey: secretKey + "\n"}, "line break"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := sampling.New(tc.o)
			if !errors.Is(err, sampling.ErrOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrOptions saying %q", err, tc.want)
			}
			if strings.Contains(err.Error(), secretKey) {
				t.Errorf("error holds the key: %v", err)
			}
		})
	}
}

func TestProviderPrintsNoKey(t *testing.T) {
	p, err := sampling.New(&sampling.Options{BaseURL: "http://localhost:11434/v1", Model: "llama3.2", APIKey: secretKey})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"%v", "%+v", "%#v", "%s"} {
		if s := fmt.Sprintf(f, p); strings.Contains(s, secretKey) || !strings.Contains(s, "llama3.2") {
			t.Errorf("%s: %s", f, s)
		}
	}
}
