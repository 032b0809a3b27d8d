package urlmsg

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// Fields are the names an input object may carry, spelled exactly (JSON
// names are case-sensitive).
var Fields = []string{"host", "url", "etag", "lastModified", "validatorsUrl", "refresh", "refreshAdapt", "emitUnchanged"}

// decodeObject reads one input object by the one rule every entrance
// applies (files, stdin, POST /urls, the input queue): only the fields in
// Fields, each at most once, each a string (refreshAdapt and emitUnchanged
// a boolean) or null (absent). Any other
// field is refused, naming it and the known ones: ignoring it would drop a
// misspelt validator ("lastModfied") without a word, and refetch in full
// what was meant to be a conditional GET; refusing costs the producer one
// edit, and a field added later is still a compatible change.
func decodeObject(t []byte) (Input, error) {
	// The common case, every name exact and once, costs one Unmarshal
	// into the struct; anything else takes the token walk, which says
	// what is wrong (encoding/json alone would match names in any case
	// and keep the last of two).
	if exactFields(t) {
		var in Input
		if json.Unmarshal(t, &in) == nil {
			return in, nil
		}
	}
	return walkObject(t)
}

// exactFields reports whether the members of the object t are each named
// exactly as one of Fields (no escapes), each at most once. t is valid
// JSON (Parse has decoded it as part of its payload).
func exactFields(t []byte) bool {
	var seen uint32 // bit k: Fields[k] was seen
	depth, key := 0, false
	for i := 0; i < len(t); i++ {
		switch c := t[i]; c {
		case '{', '[':
			depth++
			key = c == '{' && depth == 1
		case '}', ']':
			depth--
		case ',':
			key = depth == 1
		case '"':
			j := i + 1
			for j < len(t) && t[j] != '"' {
				if t[j] == '\\' {
					j++
				}
				j++
			}
			if key {
				k := fieldIndex(t[i+1 : min(j, len(t))])
				if k < 0 || seen&(1<<k) != 0 {
					return false
				}
				seen, key = seen|1<<k, false
			}
			i = j
		}
	}
	return true
}

// fieldIndex is the index in Fields of name, -1 when it is none.
func fieldIndex(name []byte) int {
	for k, f := range Fields {
		if string(name) == f {
			return k
		}
	}
	return -1
}

// walkObject decodes t member by member, naming any unknown, repeated or
// mistyped field.
func walkObject(t []byte) (Input, error) {
	var in Input
	dec := json.NewDecoder(bytes.NewReader(t))
	if _, err := dec.Token(); err != nil {
		return in, invalid("item is not a JSON object: %v", err)
	}
	var unknown []string
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return in, invalid("item is not a JSON object: %v", err)
		}
		name, _ := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return in, invalid("item is not a JSON object: %v", err)
		}
		field := in.field(name)
		if field == nil {
			unknown = append(unknown, name)
			continue
		}
		if seen[name] {
			return in, invalid("field %q appears twice: keep one", name)
		}
		seen[name] = true
		if string(raw) == "null" {
			continue
		}
		if err := json.Unmarshal(raw, field); err != nil {
			want := "a JSON string"
			if _, ok := field.(*bool); ok {
				want = "true or false"
			}
			return in, invalid("field %q must be %s, not %s", name, want, jsonKind(raw))
		}
	}
	if len(unknown) > 0 {
		return in, unknownFields(unknown)
	}
	return in, nil
}

// field is where a known field's value goes (a *string or a *bool); nil
// for an unknown name.
func (in *Input) field(name string) any {
	switch name {
	case "host":
		return &in.Host
	case "url":
		return &in.URL
	case "etag":
		return &in.ETag
	case "lastModified":
		return &in.LastModified
	case "validatorsUrl":
		return &in.ValidatorsURL
	case "refresh":
		return &in.Refresh
	case "refreshAdapt":
		return &in.RefreshAdapt
	case "emitUnchanged":
		return &in.EmitUnchanged
	}
	return nil
}

func unknownFields(names []string) error {
	var parts []string
	for i, n := range names {
		if i == 3 {
			parts = append(parts, fmt.Sprintf("and %d more", len(names)-i))
			break
		}
		p := fmt.Sprintf("%q", clip(n, 40))
		if s := suggest(n); s != "" {
			p += fmt.Sprintf(" (did you mean %q?)", s)
		}
		parts = append(parts, p)
	}
	word, it := "field", "it"
	if len(names) > 1 {
		word, it = "fields", "them"
	}
	return invalid("unknown %s %s: an item's fields are %s; rename or remove %s", word, strings.Join(parts, ", "), strings.Join(Fields, ", "), it)
}

// suggest returns the known field a name is most likely a typo of: the
// same but for case, or within an edit per four letters of the field (one
// for url, three for lastModified); "" when none is.
func suggest(name string) string {
	best, bestDist := "", len(name)+1
	for _, f := range Fields {
		if strings.EqualFold(name, f) {
			return f
		}
		d := editDistance(strings.ToLower(name), strings.ToLower(f))
		if d <= max(1, len(f)/4) && d < bestDist {
			best, bestDist = f, d
		}
	}
	return best
}

// editDistance is the Levenshtein distance, for names of a few bytes (a
// longer name is far from every field anyway).
func editDistance(a, b string) int {
	if len(a) > 64 {
		return len(a)
	}
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// jsonKind names the kind of a JSON value, for an error.
func jsonKind(raw []byte) string {
	switch t := bytes.TrimSpace(raw); {
	case len(t) == 0:
		return "nothing"
	case t[0] == '{':
		return "an object"
	case t[0] == '[':
		return "an array"
	case t[0] == 't' || t[0] == 'f':
		return "a boolean"
	case t[0] == '"':
		return "a string"
	default:
		return "a number"
	}
}
