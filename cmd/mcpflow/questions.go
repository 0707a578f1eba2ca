package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/mcpflow/mcpflow/advice"
	"github.com/mcpflow/mcpflow/elicit"
	"github.com/mcpflow/mcpflow/engine"
	"github.com/mcpflow/mcpflow/journal"
)

// printQuestions prints the questions servers asked during the run's calls
// (elicitations), each with its answer — who gave it, when, what (secret
// fields redacted) — or, while it waits, the fields it asks for and the
// command that answers it.
func printQuestions(w io.Writer, tf timeFormat, run *journal.Run, invs []journal.Invocation) {
	var lines []string
	for i := range invs {
		inv := &invs[i]
		for _, in := range inv.Inputs {
			reqs, err := in.Parsed()
			if err != nil {
				lines = append(lines, fmt.Sprintf("  step %s: %v", stepName(inv), err))
				continue
			}
			for _, r := range reqs {
				lines = append(lines, questionLines(tf, run, inv, &in, r)...)
			}
		}
	}
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "\nQuestions:")
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
}

// questionLines is one question of a call and its answer, or how to give one.
func questionLines(tf timeFormat, run *journal.Run, inv *journal.Invocation, in *journal.Input, r journal.InputRequest) []string {
	head := fmt.Sprintf("  step %s, attempt %d: %s", stepName(inv), in.Attempt, r.Method)
	if r.Method == engine.MethodApprove {
		if a := in.Answer(r.Key); a != nil {
			return []string{fmt.Sprintf("  step %s, attempt %d: sending the sampling request, %s by %s at %s", stepName(inv), in.Attempt, approvalWord(a.Response), a.By, tf.at(a.At))}
		}
		return []string{fmt.Sprintf("  step %s, attempt %d: the server's sampling request waits for approval", stepName(inv), in.Attempt),
			fmt.Sprintf("    answer: mcpflow answer %s %s --approve | --decline", run.ID.Short(), inv.Step)}
	}
	if r.Method != elicit.Method {
		if a := in.Answer(r.Key); a != nil {
			return []string{fmt.Sprintf("%s, answered by %s", head, a.By)}
		}
		return []string{head + " (mcpflow does not answer it)"}
	}
	q, err := elicit.Parse(r.Params)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v", head, err)}
	}
	out := []string{fmt.Sprintf("%s %q", head, q.Message)}
	if q.Mode == "url" {
		out = append(out, "    open: "+q.URL)
	}
	if a := in.Answer(r.Key); a != nil {
		return append(out, fmt.Sprintf("    %s  %s answered: %s", tf.at(a.At), a.By, q.Redact(a.Response)))
	}
	if q.Mode == "url" {
		return append(out, fmt.Sprintf("    answer: mcpflow answer %s %s --done (once finished there; the server may say so itself) | --decline | --cancel", run.ID.Short(), inv.Step))
	}
	fields, _ := q.Fields()
	var example []string
	for _, f := range fields {
		kind := f.Type
		if len(f.Enum) > 0 {
			kind = "one of " + strings.Join(f.Enum, ", ")
		}
		if f.Required {
			kind += ", required"
			example = append(example, "--field "+f.Name+"=…")
		}
		if f.Secret {
			kind += ", secret"
		}
		desc := f.Description
		if f.Title != "" {
			desc = strings.TrimSpace(f.Title + ": " + desc)
		}
		out = append(out, fmt.Sprintf("    %-14s %s  %s", f.Name, kind, desc))
	}
	step := inv.Step
	if inv.Item >= 0 {
		step += fmt.Sprintf(" --item %d", inv.Item)
	}
	ans := strings.Join(append([]string{"mcpflow answer", run.ID.Short(), step}, example...), " ")
	return append(out, fmt.Sprintf("    answer: %s | --decline | --cancel", ans))
}

// questionText is what a call waiting for input asks (advice.Question).
func questionText(inv *journal.Invocation) string { return advice.Question(inv) }

// approvalWord is an approval's answer in a word.
func approvalWord(resp []byte) string {
	if strings.Contains(string(resp), `"accept"`) {
		return "approved"
	}
	return "declined"
}
