package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/itchyny/gojq"
)

// printer writes what a command returns in the format the user chose with
// --output: json (indented), jsonl (one JSON value a line; a list one
// element a line), or table (the command's human rendering, given as a
// function). Every command prints through it; none branches on the format.
//
// --json FIELDS keeps only the named fields of the value (of each element
// of a list) and --jq EXPR filters it with jq; either one implies JSON
// output, like gh's flags of the same names.
type printer struct {
	w      io.Writer
	format string
	fields []string
	jq     *gojq.Code
}

// print writes v as JSON or JSON Lines, or runs table for the table format.
func (p printer) print(v any, table func(w io.Writer) error) error {
	if len(p.fields) > 0 || p.jq != nil {
		return p.filtered(v)
	}
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

// structured reports whether the output is JSON or JSON Lines.
func (p printer) structured() bool {
	return p.format != "table" || len(p.fields) > 0 || p.jq != nil
}

// filtered prints v reduced to the chosen fields and passed through the jq
// expression. jq's results are printed one a line: strings raw, anything
// else as compact JSON (jq -r's rules, as gh prints them).
func (p printer) filtered(v any) error { return p.filteredAs(v, v) }

// filteredAs is filtered, with the fields --json may name taken from
// shape (a value of v's type, or of its element type).
func (p printer) filteredAs(v, shape any) error {
	doc, err := generic(v)
	if err != nil {
		return err
	}
	if len(p.fields) > 0 {
		if doc, err = selectFields(doc, p.fields, fieldsOf(shape)); err != nil {
			return err
		}
	}
	if p.jq == nil {
		format := p.format
		if format == "table" {
			format = "json"
		}
		return printer{w: p.w, format: format}.print(doc, nil)
	}
	iter := p.jq.Run(doc)
	for {
		out, ok := iter.Next()
		if !ok {
			return nil
		}
		if err, ok := out.(error); ok {
			if err, ok := err.(*gojq.HaltError); ok && err.Value() == nil {
				return nil
			}
			return usageError("--jq: %v", err)
		}
		if s, ok := out.(string); ok {
			if _, err := fmt.Fprintln(p.w, s); err != nil {
				return err
			}
			continue
		}
		b, err := gojq.Marshal(out)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(p.w, "%s\n", b); err != nil {
			return err
		}
	}
}

// generic turns v into the plain JSON values jq works on (maps, slices,
// json.Number), through its JSON encoding so field names are the stable
// ones.
func generic(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var doc any
	err = dec.Decode(&doc)
	return doc, err
}

// selectFields keeps the named fields of an object, or of each object in a
// list. A field the value does not have is a usage error naming the ones
// it has.
func selectFields(doc any, fields, known []string) (any, error) {
	for _, f := range fields {
		if !slices.Contains(known, f) {
			return nil, usageError("--json: unknown field %q; available fields: %s", f, strings.Join(known, ", "))
		}
	}
	pick := func(o any) any {
		m, ok := o.(map[string]any)
		if !ok {
			return o
		}
		out := make(map[string]any, len(fields))
		for _, f := range fields {
			out[f] = m[f]
		}
		return out
	}
	if list, ok := doc.([]any); ok {
		for i := range list {
			list[i] = pick(list[i])
		}
		return list, nil
	}
	return pick(doc), nil
}

// fieldsOf names the JSON fields of v's objects, sorted: those of its
// type (of its element type, for a list, so an empty list still knows
// them), or the keys of a map.
func fieldsOf(v any) []string {
	t := reflect.TypeOf(v)
	for t != nil && (t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer) {
		t = t.Elem()
	}
	var names []string
	switch {
	case t == nil:
	case t.Kind() == reflect.Struct:
		names = structFields(t)
	case t.Kind() == reflect.Map:
		for _, k := range reflect.ValueOf(v).MapKeys() {
			names = append(names, fmt.Sprint(k.Interface()))
		}
	}
	slices.Sort(names)
	return names
}

// structFields names a struct type's JSON fields as encoding/json does,
// with those of embedded structs promoted.
func structFields(t reflect.Type) []string {
	var names []string
	for f := range t.Fields() {
		tag, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case tag == "-" || (!f.IsExported() && !f.Anonymous):
		case f.Anonymous && tag == "" && f.Type.Kind() == reflect.Struct:
			names = append(names, structFields(f.Type)...)
		case tag != "":
			names = append(names, tag)
		default:
			names = append(names, f.Name)
		}
	}
	return names
}

// parseFields reads --json's comma-separated field list.
func parseFields(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

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
