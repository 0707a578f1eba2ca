package main

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/mattn/go-runewidth"
)

// Human views lay values out for people; machine formats (-o json, -o
// jsonl, --json, --jq) print them exactly as they are, through the
// printer. The functions here are where a value is shortened or reflowed,
// and only for the table format.

// previewWidth is the most columns a one-line preview of a value takes: a
// step's result on its progress line, an error in a table's ERROR column.
const previewWidth = 60

// preview is s on one line, in at most width columns: JSON compacted,
// other text with each run of white space (newlines included) one space;
// cut with an ellipsis when it is longer.
func preview(s string, width int) string {
	s = strings.TrimSpace(s)
	var b bytes.Buffer
	if (strings.HasPrefix(s, "{") || strings.HasPrefix(s, "[")) && json.Compact(&b, []byte(s)) == nil {
		s = b.String()
	} else {
		s = strings.Join(strings.Fields(s), " ")
	}
	return runewidth.Truncate(s, width, "…")
}
