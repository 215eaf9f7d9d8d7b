package result

import (
	"regexp"
	"strings"
	"unicode"
)

// Credentials that travel inside URLs and HTTP headers: a URL's userinfo
// (https://user:password@host), query and fragment parameters whose names say
// they hold a secret (?password=, &token=, #access_token=, ...), the same
// inside a percent-encoded URL (a redirect target), and the Authorization
// header forms a Proxmox VE client sends (PVEAPIToken=ID=SECRET, Bearer,
// PVEAuthCookie). They are found in any text, as errors embed URLs in it
// (`Get "https://...": dial tcp ...`), whether or not the secret is known.

var (
	// encodedURL is a percent-encoded URL, encoded once or more
	// (scheme%3A%2F%2F..., scheme%253A%252F%252F...), up to where a query
	// value or a word ends.
	encodedURL = regexp.MustCompile(`(?i)[a-z][a-z0-9+.-]{0,31}%(?:25)*3a%(?:25)*2f%(?:25)*2f[^\s"'<>&]*`)
	// headerSecret is a credential as an HTTP client sends or logs it; the
	// secret is the last group.
	headerSecret = regexp.MustCompile(`(?i)(\bPVEAPIToken\s*[=:]\s*[^\s=]+=)([^\s"'&,;]+)` +
		`|(\bauthorization\s*[:=]\s*(?:bearer|basic|token)\s+)([^\s"',;]+)` +
		`|(\bbearer\s+)([A-Za-z0-9._~+/-]{16,}=*)` +
		`|(\b(?:PVEAuthCookie|CSRFPreventionToken)\s*[=:]\s*)([^\s"';,&]+)`)
	// invalidPort is net/url's complaint about a URL whose password holds a
	// "/": it quotes what follows the first colon, the password's start.
	invalidPort = regexp.MustCompile(`(invalid port ")([^"]*)(" after host)`)
	// plainUser is a user name kept in front of a redacted password: short
	// and made of what user names are made of (a token used as the user name
	// is long, and goes with the password).
	plainUser = regexp.MustCompile(`^[A-Za-z0-9._~%!@-]{1,32}$`)
)

// secretParams are parameter names (lower case, without "-", "_", "." and
// brackets) that hold a secret; secretParamParts are parts of such names.
var (
	secretParams = map[string]bool{
		"pass": true, "pwd": true, "pw": true, "key": true, "auth": true, "sig": true, "code": true,
		"ticket": true, "session": true, "sid": true, "jwt": true, "otp": true,
	}
	secretParamParts = []string{
		"password", "passwd", "passphrase", "secret", "token", "apikey", "accesskey", "privatekey",
		"signature", "credential", "sessionid", "authorization", "authkey", "cookie",
	}
)

// scrubURLs removes credentials from URLs and HTTP headers in text.
func scrubURLs(text string) string {
	return scrubURLsDepth(text, 0)
}

// maxURLNesting bounds how many times an encoded URL inside a URL is decoded.
const maxURLNesting = 3

func scrubURLsDepth(text string, depth int) string {
	if depth < maxURLNesting && strings.Contains(text, "%") {
		text = encodedURL.ReplaceAllStringFunc(text, func(enc string) string {
			dec := percentDecode(enc)
			if scrubURLsDepth(dec, depth+1) != dec {
				return Redacted
			}

			return enc
		})
	}

	if strings.Contains(text, "://") {
		text = scrubUserinfo(text)
	}

	if strings.Contains(text, "=") && strings.ContainsAny(text, "?&;#") {
		text = scrubParams(text)
	}

	if mayHoldHeader(text) {
		text = headerSecret.ReplaceAllStringFunc(text, scrubHeader)
	}

	if strings.Contains(text, "invalid port") {
		text = invalidPort.ReplaceAllStringFunc(text, func(m string) string {
			g := invalidPort.FindStringSubmatch(m)
			if strings.Trim(g[2], ":0123456789") == "" {
				return m // a number: no password
			}

			return g[1] + Redacted + g[3]
		})
	}

	return text
}

// scrubUserinfo replaces the userinfo of every URL in text: a password by
// Redacted (user:[redacted]@host), a user name alone, or one that does not
// look like a plain user name, whole ([redacted]@host).
func scrubUserinfo(text string) string {
	var (
		b    strings.Builder
		last int
	)

	for off := 0; ; {
		i := strings.Index(text[off:], "://")
		if i < 0 {
			break
		}

		start := off + i + 3
		off = start

		if start < last || !afterScheme(text[:start-3]) {
			continue // inside a userinfo already replaced, or no URL
		}

		n, red := redactAuthority(text[start:])
		if red == text[start:start+n] {
			continue
		}

		b.WriteString(text[last:start])
		b.WriteString(red)
		last = start + n
	}

	if last == 0 {
		return text
	}

	b.WriteString(text[last:])

	return b.String()
}

// redactAuthority looks at the start of rest (what follows a URL's "://")
// and returns how many bytes of it to replace, and with what; the
// replacement is those bytes when there is nothing to redact.
//
// As net/url reads a URL, the authority ends at the first "/", "?" or "#",
// and its userinfo at the last "@" in it (a password may hold "@"). A URL
// whose password holds an unencoded "/", "?" or "#" is not one for net/url
// (its host would be "user:pa"), but printed it still shows the password:
// an authority that ends in ":" and something other than a port, with an "@"
// further on in the same word, is taken as userinfo up to that "@". Without
// such an "@", what follows the colon is no port either (user:password
// without the host, or a password with a space): it goes.
func redactAuthority(rest string) (int, string) {
	word := rest
	if i := strings.IndexFunc(rest, endsWord); i >= 0 {
		word = rest[:i]
	}

	auth := word
	if i := strings.IndexAny(word, "/?#"); i >= 0 {
		auth = word[:i]
	}

	if i := strings.LastIndexByte(auth, '@'); i >= 0 {
		return i, redactUserinfo(auth[:i])
	}

	c := strings.IndexByte(auth, ':')
	if c < 0 || strings.HasPrefix(auth, "[") || strings.Trim(auth[c+1:], "0123456789") == "" {
		return 0, ""
	}

	if j := strings.IndexByte(word[len(auth):], '@'); j >= 0 {
		n := len(auth) + j

		return n, redactUserinfo(word[:n])
	}

	// An unbracketed IPv6 address (fe80::1) is not a URL's host, but it is
	// no secret either; nor is a port followed by what text puts around a
	// URL (etcd's "[https://10.0.0.3:2380]", JSON's "https://10.0.0.3:2380"}).
	if strings.Count(auth, ":") > 1 || auth[c+1:] == Redacted || portThenPunctuation(auth[c+1:]) {
		return 0, ""
	}

	return len(auth), auth[:c+1] + Redacted
}

// portThenPunctuation reports whether s is a port (1 to 5 digits) followed
// only by punctuation: no letter, digit or "@".
func portThenPunctuation(s string) bool {
	d := 0
	for d < len(s) && '0' <= s[d] && s[d] <= '9' {
		d++
	}

	if d == 0 || d > 5 {
		return false
	}

	for _, r := range s[d:] {
		if r == '@' || unicode.IsLetter(r) || unicode.IsDigit(r) {
			return false
		}
	}

	return true
}

// afterScheme reports whether before ends with a URL scheme (a letter, then
// letters, digits, "+", "-" and "."), as what precedes a "://" of a URL.
func afterScheme(before string) bool {
	i := len(before)
	for i > 0 && len(before)-i < 32 && isSchemeByte(before[i-1]) {
		i--
	}

	for ; i < len(before); i++ {
		if c := before[i]; 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' {
			return true
		}
	}

	return false
}

func isSchemeByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '+' || c == '-' || c == '.'
}

// headerWords are the words headerSecret needs, lower case.
var headerWords = []string{"pveapitoken", "authorization", "bearer", "pveauthcookie", "csrfpreventiontoken"}

// mayHoldHeader reports whether text holds a word headerSecret starts at: a
// cheap test first, as nearly no text does.
func mayHoldHeader(text string) bool {
	lower := strings.ToLower(text)

	for _, w := range headerWords {
		if strings.Contains(lower, w) {
			return true
		}
	}

	return false
}

// endsWord reports whether r ends the word a URL is read from: a space or a
// control character, or what a URL cannot hold and text puts around one.
// Quotes do not: a password may hold one.
func endsWord(r rune) bool {
	return r <= ' ' || r == 0x7f || r == '<' || r == '>' || r == '`'
}

func redactUserinfo(ui string) string {
	if ui == "" {
		return ui
	}

	user, pass, hasPass := strings.Cut(ui, ":")

	switch {
	case hasPass && pass == "":
		return ui // user: with an empty password
	case hasPass && plainUser.MatchString(user):
		return user + ":" + Redacted
	}

	return Redacted
}

// maxParamName bounds the name of a parameter looked at.
const maxParamName = 128

// scrubParams redacts the value of every name=value after "?", "&", ";" or
// "#" (a query or fragment parameter, in a URL or in a request line without
// one) whose name says it is a secret. Each separator is looked at on its
// own, so that a parameter is found also inside another one's value
// ("?next=/x?token=..."). A secret value runs to the next "&" or "#", a
// space, a double quote or an angle bracket (none of which a URL holds
// unencoded): a password holding ";" or "?" goes whole.
func scrubParams(text string) string {
	var (
		b    strings.Builder
		last int
	)

	for i := 0; i < len(text); i++ {
		if c := text[i]; c != '?' && c != '&' && c != ';' && c != '#' {
			continue
		}

		j := i + 1
		for j < len(text) && j-i <= maxParamName && isParamNameByte(text[j]) {
			j++
		}

		if j == i+1 || j >= len(text) || text[j] != '=' {
			continue
		}

		k := j + 1
		for k < len(text) && !endsParamValue(text[k]) {
			k++
		}

		// A value cut at an escaped quote (`\"` in a %q-quoted URL) keeps
		// its backslash, so that the quoting stays balanced.
		end := k
		if end > j+1 && text[end-1] == '\\' {
			end--
		}

		if value := text[j+1 : end]; value == "" || value == Redacted || !isSecretParam(text[i+1:j]) {
			continue
		}

		b.WriteString(text[last : j+1])
		b.WriteString(Redacted)
		last = end
		i = end - 1
	}

	if last == 0 {
		return text
	}

	b.WriteString(text[last:])

	return b.String()
}

func isParamNameByte(c byte) bool {
	return isHex(c) || 'g' <= c && c <= 'z' || 'G' <= c && c <= 'Z' || strings.IndexByte("_.%+~[]-", c) >= 0
}

func endsParamValue(c byte) bool {
	return c <= ' ' || c == 0x7f || strings.IndexByte("&#\"<>`", c) >= 0
}

// isSecretParam reports whether a query or fragment parameter's name (as
// written, maybe percent-encoded) says it holds a secret.
func isSecretParam(name string) bool {
	n := strings.ToLower(percentDecode(strings.ReplaceAll(name, "+", " ")))
	n = strings.Map(func(r rune) rune {
		switch r {
		case '-', '_', '.', '[', ']', ' ', '~':
			return -1
		}

		return r
	}, n)

	if secretParams[n] {
		return true
	}

	for _, p := range secretParamParts {
		if strings.Contains(n, p) {
			return true
		}
	}

	return false
}

// scrubHeader redacts the secret of one headerSecret match.
func scrubHeader(m string) string {
	g := headerSecret.FindStringSubmatch(m)

	for i := 1; i+1 < len(g); i += 2 {
		if g[i] != "" || g[i+1] != "" {
			// A secret cut at an escaped quote (`\"` in %q-quoted text)
			// keeps its backslash, so that the quoting stays balanced.
			if strings.HasSuffix(g[i+1], `\`) {
				return g[i] + Redacted + `\`
			}

			return g[i] + Redacted
		}
	}

	return m
}

// percentDecode decodes every valid %XX of s and leaves anything else as it
// is: a malformed escape must not keep the rest of a URL from being read.
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}

	var b strings.Builder

	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2

			continue
		}

		b.WriteByte(s[i])
	}

	return b.String()
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	}

	return c - 'A' + 10
}
