package proxmox

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// writeReply writes rep as PVE::APIServer::AnyEvent::response does: the
// status line carries the first line of the message as its reason phrase,
// errors close the connection, and the json formatter's body is
// {"data": ...} plus "message" (and "errors") on error.
func writeReply(w http.ResponseWriter, r *http.Request, rep reply) {
	var body []byte

	if !rep.noBody {
		out := map[string]any{"data": rep.data}

		if rep.code >= http.StatusBadRequest {
			out["data"] = nil
			out["message"] = rep.msg

			if len(rep.errors) > 0 {
				out["errors"] = rep.errors
			}
		}

		body, _ = json.Marshal(out)
	}

	now := time.Now().UTC().Format(http.TimeFormat)
	hdr := http.Header{}
	hdr.Set("Server", "pve-api-daemon/3.0")
	hdr.Set("Date", now)
	hdr.Set("Expires", now)
	hdr.Set("Cache-Control", "max-age=0")
	hdr.Set("Pragma", "no-cache")

	if len(body) > 0 {
		hdr.Set("Content-Type", "application/json;charset=UTF-8")
		hdr.Set("Content-Length", strconv.Itoa(len(body)))
	}

	if rep.code < http.StatusBadRequest {
		for k, v := range hdr {
			w.Header()[k] = v
		}

		w.WriteHeader(rep.code)
		_, _ = w.Write(body)

		return
	}

	reason := firstLine(rep.msg)
	if reason == "" {
		reason = http.StatusText(rep.code)
	}

	hdr.Set("Connection", "close")

	hj, ok := w.(http.Hijacker)
	if !ok {
		// Cannot write our own status line (e.g. HTTP/2): keep the code.
		for k, v := range hdr {
			w.Header()[k] = v
		}

		w.WriteHeader(rep.code)
		_, _ = w.Write(body)

		return
	}

	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()

	var out bytes.Buffer
	fmt.Fprintf(&out, "%s %d %s\r\n", r.Proto, rep.code, reason)
	_ = hdr.Write(&out)
	out.WriteString("\r\n")
	out.Write(body)

	_, _ = buf.Write(out.Bytes())
	_ = buf.Flush()
}
