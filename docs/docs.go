// Package docs embeds documents the code serves: the HTTP server's OpenAPI
// description (served at GET /openapi.json by core/server).
package docs

import _ "embed"

// OpenAPI is docs/openapi.json, the OpenAPI 3 description of `rlm serve`.
//
//go:embed openapi.json
var OpenAPI []byte
