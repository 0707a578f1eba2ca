package journal

// Method is the MCP request an invocation sends, by its name on the wire.
// The zero Method is tools/call: records written before other requests
// were journaled have no method, and are calls.
//
// A Method is its journaled name, a string, so that a record written by a
// newer mcpflow, with a method this one does not know, reads back and is
// written again unchanged. An unknown method is judged as a call: the safe
// side ([Method.Reads] is false).
type Method string

const (
	// MethodCall is tools/call. Invocation.Tool names the tool.
	MethodCall Method = ""
	// MethodRead is resources/read. Invocation.Tool holds the resource's
	// URI (secret input values redacted), Arguments the request's params
	// ({"uri": …}).
	MethodRead Method = "resources/read"
	// MethodPrompt is prompts/get. Invocation.Tool names the prompt,
	// Arguments are the prompt's arguments.
	MethodPrompt Method = "prompts/get"
)

// Methods is every method this mcpflow sends, MethodCall first.
var Methods = []Method{MethodCall, MethodRead, MethodPrompt}

// String returns the method's name on the wire: "tools/call" for
// MethodCall.
func (m Method) String() string {
	if m == MethodCall {
		return "tools/call"
	}
	return string(m)
}

// Known reports whether m is one of Methods.
func (m Method) Known() bool {
	for _, k := range Methods {
		if m == k {
			return true
		}
	}
	return false
}

// Reads reports whether the request only reads: a resources/read or a
// prompts/get, which change nothing on the server, so that sending one
// again repeats no side effect whatever the server declares or whether it
// is trusted. A tools/call, and a method this mcpflow does not know, do
// not.
func (m Method) Reads() bool { return m == MethodRead || m == MethodPrompt }
