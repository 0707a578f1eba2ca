// Package sampling answers the sampling/createMessage requests of MCP
// servers with a language model reached over an OpenAI-compatible
// chat-completions API: OpenAI itself, or a local Ollama, vLLM, llama.cpp
// server or LM Studio.
//
// [Provider] is the one type: [New] builds it from [Options] (the API's
// base URL, the model, an API key, a timeout) and [Provider.CreateMessage]
// turns one request into one POST of BASE_URL/chat/completions and its
// reply into an MCP result. It does not know where its options came from
// (package upstream reads the sampling: section of mcpflow.yaml), and it
// journals nothing: whoever calls it records the exchange.
//
// # What is sent
//
//	MCP request                    chat-completions request
//	systemPrompt                   a first message with role "system"
//	messages[].role                messages[].role ("user", "assistant")
//	text content                   messages[].content, a string
//	image content                  a content part {"type": "image_url", "image_url":
//	                               {"url": "data:MIME;base64,…"}}, user messages only
//	maxTokens                      max_tokens (max_completion_tokens for the
//	                               OpenAI reasoning models that refuse max_tokens)
//	temperature                    temperature (0, as in MCP, means not given)
//	stopSequences                  stop
//	                               model: always Options.Model
//
// And back: the first choice's message content becomes the result's text
// content (its refusal when the content is empty), with role "assistant",
// the model the API names (Options.Model when it names none), and
// finish_reason as stopReason: "stop" → "endTurn", "length" →
// "maxTokens", "tool_calls" and "function_call" → "toolUse",
// "content_filter" → "contentFilter", any other value as it came.
//
// # Caveats
//
//   - modelPreferences (hints and priorities) are ignored: the model is the
//     one the operator configured, so that a server cannot choose a
//     costlier one. includeContext is ignored (mcpflow holds no
//     conversation to include), and so is metadata, which is not forwarded
//     to the provider.
//   - Audio content, tool use and tool results cannot be sent: the request
//     fails with [ErrUnsupportedContent] and nothing is sent. Images are
//     sent as data URLs, which OpenAI's vision models, Ollama and vLLM
//     accept; a model without vision answers with an error of its own.
//   - One request is one POST: nothing is retried, and a redirect is an
//     error rather than a second POST elsewhere. A reply larger than
//     [MaxReplySize] is refused.
//   - The API key goes only in the Authorization header of that POST
//     ("Bearer KEY"; no header when the key is empty, as a local server
//     wants). Errors never hold the key, the request's text or what the
//     provider wrote in its error body (which may quote either): a
//     provider's refusal is reported by its HTTP status and its error's
//     type and code ([ProviderError]). [Provider.String] hides the key.
//   - Many stop sequences: OpenAI accepts four, other servers more; the
//     list is sent as given and the provider judges.
package sampling
