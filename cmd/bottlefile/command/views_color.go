package command

import "strings"

// ANSI escape codes of the colors the human plan uses.
const (
	ansiReset  = "\x1b[0m"
	ansiBold   = "\x1b[1m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
	ansiCyan   = "\x1b[36m"
)

// symbolColors colors each character of an action symbol as Terraform
// does: what is added green, what is removed red, what changes yellow.
// "-/+" shows red then green.
var symbolColors = map[rune]string{
	'+': ansiGreen, '&': ansiGreen,
	'-': ansiRed, 'x': ansiRed,
	'~': ansiYellow, '>': ansiYellow, '=': ansiYellow,
	'@': ansiCyan,
}

// palette colors human output when true and leaves it plain when false:
// color follows the terminal, NO_COLOR and -no-color (Meta.Color).
type palette bool

func (p palette) paint(code, s string) string {
	if !p || s == "" {
		return s
	}
	return code + s + ansiReset
}

func (p palette) bold(s string) string { return p.paint(ansiBold, s) }
func (p palette) dim(s string) string  { return p.paint(ansiDim, s) }

// note colors a "# forces replacement" note red.
func (p palette) note(s string) string { return p.paint(ansiRed, s) }

// symbol colors each character of a (padded) symbol by itself, so padding
// and alignment stay as they are without color.
func (p palette) symbol(sym string) string {
	if !p {
		return sym
	}
	var b strings.Builder
	for _, r := range sym {
		if code, ok := symbolColors[r]; ok {
			b.WriteString(code + string(r) + ansiReset)
		} else {
			b.WriteRune(r)
		}
	}
	return b.String()
}
