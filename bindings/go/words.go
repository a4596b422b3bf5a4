package idempotency

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// words.json is the Node package's (bindings/node/words.json), copied here
// byte for byte because go:embed reads only the package's own directory;
// the Go package's test TestWordsAreTheNodePackages fails when the copy
// differs.
//
//go:embed words.json
var wordsJSON []byte

type wordsTable struct {
	Constants map[string]string `json:"constants"`
	Formats   map[string]string `json:"formats"`
	Kinds     map[string]struct {
		Text     string            `json:"text"`
		Optional map[string]string `json:"optional"`
	} `json:"kinds"`
}

var words = func() wordsTable {
	var w wordsTable
	if err := json.Unmarshal(wordsJSON, &w); err != nil {
		panic("sqlite-idempotency: words.json: " + err.Error())
	}
	return w
}()

var field = regexp.MustCompile(`\{([a-z_]+)\}`)

// given: a field is given unless nil or an empty list (no targets).
func given(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case []string:
		return len(x) > 0
	case []any:
		return len(x) > 0
	}
	return true
}

func millis(name string, v any) int64 {
	switch x := v.(type) {
	case int64:
		return x
	case int:
		return int64(x)
	case float64:
		return int64(x)
	case json.Number:
		if n, err := x.Int64(); err == nil {
			return n
		}
	}
	panic(fmt.Sprintf("sqlite-idempotency: Say: %s must be milliseconds since the epoch, got %v", name, v))
}

func value(name string, v any, now int64) string {
	switch words.Formats[name] {
	case "iso8601":
		return time.UnixMilli(millis(name, v)).UTC().Format("2006-01-02T15:04:05.000Z")
	case "seconds_ago":
		s := (now - millis(name, v)) / 1000
		if s < 0 {
			s = 0
		}
		return strconv.FormatInt(s, 10)
	case "list":
		switch x := v.(type) {
		case []string:
			return strings.Join(x, ", ")
		case []any:
			parts := make([]string, len(x))
			for i, p := range x {
				parts[i] = fmt.Sprint(p)
			}
			return strings.Join(parts, ", ")
		}
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

func fill(kind, template string, fields map[string]any, now int64, optional map[string]string) string {
	return field.ReplaceAllStringFunc(template, func(m string) string {
		name := m[1 : len(m)-1]
		if c, ok := words.Constants[name]; ok {
			return c
		}
		if frag, ok := optional[name]; ok {
			if given(fields[name]) {
				return fill(kind, frag, fields, now, nil)
			}
			return ""
		}
		if !given(fields[name]) {
			panic(fmt.Sprintf("sqlite-idempotency: Say: the %s text needs the field %s", kind, name))
		}
		return value(name, fields[name], now)
	})
}

// Say is the text of kind (a kind of words.json: replay, in_progress,
// unknown, ...) for fields, the same as say() of the Node and Python
// packages. fields["now"] (Unix ms) sets the clock of "seconds ago".
func Say(kind string, fields map[string]any) string {
	k, ok := words.Kinds[kind]
	if !ok {
		panic(fmt.Sprintf("sqlite-idempotency: Say: unknown kind %q", kind))
	}
	now := time.Now().UnixMilli()
	if given(fields["now"]) {
		now = millis("now", fields["now"])
	}
	return fill(kind, k.Text, fields, now, k.Optional)
}

// SayConflict is what the model reads on a conflict (idem_claim's answer):
// the words of its holder's status, then, when the holder succeeded, its
// result as JSON on the next line.
func SayConflict(tool string, answer map[string]any) string {
	held, _ := answer["held_by"].(map[string]any)
	status, _ := held["status"].(string)
	kind := "conflict_claimed"
	if status == "succeeded" {
		kind = "conflict_succeeded"
	} else if status == "unknown" {
		kind = "conflict_unknown"
	}
	text := Say(kind, map[string]any{"tool": tool, "key": answer["key"], "target": answer["target"],
		"held_tool": held["tool"], "held_key": held["key"], "at": held["updated_at"]})
	if kind == "conflict_succeeded" {
		b, _ := json.Marshal(held["result"])
		text += "\n" + string(b)
	}
	return text
}
