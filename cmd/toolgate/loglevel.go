package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/toolgate/toolgate/gateway/local"
)

// logLevelBody is the JSON of GET and POST /loglevel on a gateway's status
// socket (`toolgate logs --level`).
type logLevelBody struct {
	// Level is the log's level: debug, info, warn or error. POST sets it.
	Level string `json:"level"`
	// Was, in POST's answer, is the level before.
	Was string `json:"was,omitempty"`
	// Started, in the answers, is the level the gateway was started at
	// (--log-level, $TOOLGATE_LOG_LEVEL): the one a restart with the same
	// flags gives. Absent from a gateway from before 2026-12-07.
	Started string `json:"started,omitempty"`
	// If, in a POST, sets Level only while the level is this one: `logs
	// -f --level` puts back the level it found unless someone changed it
	// meanwhile (409 Conflict then, with the level in effect).
	If string `json:"if,omitempty"`
}

// parseLogLevel reads a level as --log-level takes it.
func parseLogLevel(s string) (slog.Level, error) {
	var l slog.Level
	if err := l.UnmarshalText([]byte(s)); err != nil {
		return l, fmt.Errorf("%q: want debug, info, warn or error", s)
	}
	return l, nil
}

// levelName is l as --log-level spells it ("debug").
func levelName(l slog.Level) string { return strings.ToLower(l.String()) }

// logLevelHandler serves GET and POST /loglevel: the level of v, which the
// process's logger reads; a change is logged at the more severe of the two
// levels, so it shows under both. It is made as the gateway starts: v's
// level then is the one it was started at (Started).
func logLevelHandler(v *slog.LevelVar, log *slog.Logger) http.Handler {
	var mu sync.Mutex // a POST's If and Set are one step
	started := levelName(v.Level())
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		cur := v.Level()
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodPost {
			json.NewEncoder(w).Encode(logLevelBody{Level: levelName(cur), Started: started})
			return
		}
		var req logLevelBody
		if err := json.NewDecoder(io.LimitReader(r.Body, 4<<10)).Decode(&req); err != nil {
			http.Error(w, `want {"level": "debug"}: `+err.Error(), http.StatusBadRequest)
			return
		}
		to, err := parseLogLevel(req.Level)
		if err != nil {
			http.Error(w, "level "+err.Error(), http.StatusBadRequest)
			return
		}
		if req.If != "" {
			want, err := parseLogLevel(req.If)
			if err != nil {
				http.Error(w, "if "+err.Error(), http.StatusBadRequest)
				return
			}
			if want != cur {
				w.WriteHeader(http.StatusConflict)
				json.NewEncoder(w).Encode(logLevelBody{Level: levelName(cur), Started: started})
				return
			}
		}
		v.Set(to)
		if to != cur {
			log.Log(r.Context(), max(cur, to), "log level changed", "from", levelName(cur), "to", levelName(to), "by", "toolgate logs --level")
		}
		json.NewEncoder(w).Encode(logLevelBody{Level: levelName(to), Was: levelName(cur), Started: started})
	})
}

// errLevelChanged says a conditional POST /loglevel found another level.
var errLevelChanged = errors.New("the log level was changed meanwhile")

// setLogLevel asks the gateway at sock to log at level (only while it logs
// at cond, unless cond is ""), and returns what it answered.
func setLogLevel(ctx context.Context, sock, level, cond string) (logLevelBody, error) {
	var out logLevelBody
	code, err := askSocket(ctx, sock, http.MethodPost, local.LogLevelURL, logLevelBody{Level: level, If: cond}, &out, "`toolgate logs --level`")
	if code == http.StatusConflict {
		return out, errLevelChanged
	}
	return out, err
}
