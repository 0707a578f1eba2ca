package client

import (
	"context"
	"strings"
	"testing"

	"github.com/mcpflow/mcpflow/api"
)

// collect reads the server-sent events of text as readEvents hands them on.
func collect(text string) []api.Event {
	out := make(chan api.Event, 64)
	go func() {
		defer close(out)
		readEvents(context.Background(), strings.NewReader(text), out)
	}()
	var got []api.Event
	for e := range out {
		got = append(got, e)
	}
	return got
}

// TestReadEvents: events as the server writes them, comments and
// keep-alives skipped, a data field split over lines joined, a broken
// event dropped and the ones after it kept.
func TestReadEvents(t *testing.T) {
	stream := ": mcpflow events\n\n" +
		"event: run_started\ndata: {\"kind\":\"run_started\",\"run\":\"r1\"}\n\n" +
		": keep-alive\n\n" +
		"event: step_progress\ndata: {\"kind\":\"step_progress\",\ndata: \"run\":\"r1\",\"progress\":2}\n\n" +
		"data: {not json}\n\n" +
		"id: 7\ndata: {\"kind\":\"run_finished\",\"run\":\"r1\",\"status\":\"succeeded\"}\n\n" +
		"data: {\"kind\":\"cut\",\"run\":\"r1\"}" // no blank line: the stream ended mid-event
	got := collect(stream)
	want := []struct {
		kind   string
		status string
		prog   float64
	}{{"run_started", "", 0}, {"step_progress", "", 2}, {"run_finished", "succeeded", 0}}
	if len(got) != len(want) {
		t.Fatalf("got %d events, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].Kind != w.kind || got[i].Status != w.status || got[i].Progress != w.prog || got[i].Run != "r1" {
			t.Errorf("event %d = %+v, want %+v", i, got[i], w)
		}
	}
}

// FuzzReadEvents: whatever a stream holds, reading it ends without a
// panic, and hands on at most one event per data field: never one made
// of nothing.
func FuzzReadEvents(f *testing.F) {
	f.Add("data: {\"kind\":\"run_started\",\"run\":\"r\"}\n\n")
	f.Add(": c\n\ndata: {\ndata: }\n\n")
	f.Add("data:{}\n\ndata: [1]\n\n\n")
	f.Fuzz(func(t *testing.T, text string) {
		if got, most := len(collect(text)), strings.Count(text, "data:"); got > most {
			t.Errorf("%d events from %d data fields:\n%q", got, most, text)
		}
	})
}
