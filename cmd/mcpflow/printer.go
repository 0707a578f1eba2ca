package main

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"text/tabwriter"
)

// printer writes what a command returns in the format the user chose with
// --output: json (indented), jsonl (one JSON value a line; a list one
// element a line), or table (the command's human rendering, given as a
// function). Every command prints through it; none branches on the format.
type printer struct {
	w      io.Writer
	format string
}

// print writes v as JSON or JSON Lines, or runs table for the table format.
func (p printer) print(v any, table func(w io.Writer) error) error {
	switch p.format {
	case "json":
		enc := json.NewEncoder(p.w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "jsonl":
		enc := json.NewEncoder(p.w)
		if rv := reflect.ValueOf(v); rv.Kind() == reflect.Slice {
			for i := range rv.Len() {
				if err := enc.Encode(rv.Index(i).Interface()); err != nil {
					return err
				}
			}
			return nil
		}
		return enc.Encode(v)
	}
	return table(p.w)
}

// structured reports whether the format is JSON or JSON Lines.
func (p printer) structured() bool { return p.format != "table" }

// table writes aligned columns.
type table struct {
	tw *tabwriter.Writer
}

func newTable(w io.Writer, headers ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(headers...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }
