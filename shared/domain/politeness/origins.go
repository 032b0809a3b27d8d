package politeness

import (
	"encoding/json"
	"fmt"
	"time"
)

// The stores keep what State holds of origins (Origin, LastFailed and
// Others) as one text, so both encode it alike: "" for a host with one
// origin that answers (the common case stores nothing more), else JSON with
// times in Unix milliseconds. A state stored before origins were told
// apart has no such text: its failure run goes to the first origin worked
// (see Switch).

type originsJSON struct {
	Origin     string             `json:"o"`
	LastFailed int64              `json:"lf,omitempty"`
	Others     map[string]runJSON `json:"r,omitempty"`
}

type runJSON struct {
	PauseUntil   int64  `json:"p,omitempty"`
	Errors       int    `json:"e,omitempty"`
	FailingSince int64  `json:"f,omitempty"`
	LastError    string `json:"m,omitempty"`
	LastFailed   int64  `json:"lf,omitempty"`
}

// maxStoredError caps each other origin's LastError as stored, so
// MaxOrigins runs stay a few KiB in a host's item.
const maxStoredError = 1 << 10

func ms(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

func fromMs(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return time.UnixMilli(v)
}

// EncodeOrigins is the text a store keeps for s's origins: "" when s holds
// no other origin's run and its own run is not failing (its Origin then
// matters to nothing).
func EncodeOrigins(s State) string {
	if len(s.Others) == 0 && (s.Origin == "" || (s.FailingSince.IsZero() && s.Errors == 0)) {
		return ""
	}
	o := originsJSON{Origin: s.Origin, LastFailed: ms(s.LastFailed)}
	for name, r := range s.Others {
		if o.Others == nil {
			o.Others = map[string]runJSON{}
		}
		msg := r.LastError
		if len(msg) > maxStoredError {
			msg = msg[:maxStoredError]
		}
		o.Others[name] = runJSON{PauseUntil: ms(r.PauseUntil), Errors: r.Errors, FailingSince: ms(r.FailingSince),
			LastError: msg, LastFailed: ms(r.LastFailed)}
	}
	b, err := json.Marshal(o)
	if err != nil {
		panic(err) // strings, ints and maps of them always marshal
	}
	return string(b)
}

// DecodeOrigins sets s's Origin, LastFailed and Others from text as
// EncodeOrigins made it ("" leaves them unset).
func DecodeOrigins(text string, s *State) error {
	if text == "" {
		return nil
	}
	var o originsJSON
	if err := json.Unmarshal([]byte(text), &o); err != nil {
		return fmt.Errorf("read the failure runs of a host's origins: %w", err)
	}
	s.Origin, s.LastFailed, s.Others = o.Origin, fromMs(o.LastFailed), nil
	for name, r := range o.Others {
		if s.Others == nil {
			s.Others = map[string]Run{}
		}
		s.Others[name] = Run{PauseUntil: fromMs(r.PauseUntil), Errors: r.Errors, FailingSince: fromMs(r.FailingSince),
			LastError: r.LastError, LastFailed: fromMs(r.LastFailed)}
	}
	return nil
}
