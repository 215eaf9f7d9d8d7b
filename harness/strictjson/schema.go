package strictjson

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

// SchemaError checks the "schema" field of data, the content of file, against
// the schemas a reader knows (want), for a reader to report before, or
// instead of, what a strict decoding found: a file of another schema or
// another kind (what names the kind: "a talchaos report") fails with that,
// rather than with whatever its shape causes. It returns nil when the schema
// is one of want, or when data is not JSON with a top-level object whose
// schema is a string or absent (the strict decoding says what is wrong then).
func SchemaError(file string, data []byte, what string, want ...string) error {
	var head struct {
		Schema *string `json:"schema"`
	}

	if json.Unmarshal(data, &head) != nil {
		return nil
	}

	wanted := strings.Join(want, " or ")

	switch {
	case head.Schema == nil:
		return Locate(file, data, []*Error{{Path: "schema", Msg: fmt.Sprintf("missing: want %s (not %s?)", wanted, what)}})
	case !slices.Contains(want, *head.Schema):
		return Locate(file, data, []*Error{{Path: "schema", Msg: fmt.Sprintf("is %s: want %s (not %s this talchaos can read)", Quote(*head.Schema), wanted, what)}})
	}

	return nil
}
