package config

import (
	"errors"
	"fmt"
	"os"
)

// Load reads, expands and validates the config file at path.
func Load(path string) (*File, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, path, nil)
}

// Parse decodes, expands and validates a config file's bytes. path names the
// file in errors and anchors relative paths ("" = the working directory).
// lookupEnv resolves ${VAR} references; nil means os.LookupEnv. (It reports
// presence, unlike os.Getenv, so that a variable set to "" is not "unset".)
func Parse(data []byte, path string, lookupEnv func(string) (string, bool)) (*File, error) {
	return nil, errors.New("config: not implemented yet")
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "a boolean"
	case float64:
		return "a number"
	case string:
		return "a string"
	case []any:
		return "an array"
	case map[string]any:
		return "an object"
	}
	return fmt.Sprintf("%T", v)
}
