package sampling

// SetReplyLimit lowers the bound of a reply's size, and returns what puts
// it back.
func SetReplyLimit(n int64) (restore func()) {
	old := replyLimit
	replyLimit = n
	return func() { replyLimit = old }
}
