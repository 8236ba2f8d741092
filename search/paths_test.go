package search

import "testing"

// What a query's paths and file names are ranked as, and the words that
// look like them and are not.
func TestPathHint(t *testing.T) {
	for q, want := range map[string]string{
		"read config.yaml":                               " (a file)",
		"read /etc/hosts":                                " (a file)",
		"show me what is in README.md.":                  " (a file)",
		"open ~/notes and ./run.sh":                      " (files)",
		"compare config.yaml and config.prod.yaml":       " (files)",
		"list what is in src/":                           " (a folder)",
		"copy src/ and build/ to /tmp/out/":              " (folders)",
		"move report.txt into archive/":                  " (files and folders)",
		"replace the line containing DEBUG=true in .env": " (a file)",
		"build the Dockerfile":                           " (a file)",
		"fetch 'main.py' for me":                         " (a file)",
		// It says what they are itself.
		"read the file config.yaml":        "",
		"find Report.docx in my documents": "",
		"list the folder src/":             "",
		// No paths.
		"deploy my Node.js app":                             "",
		"sales tax in Washington, D.C.":                     "",
		"type /random in the chat":                          "",
		"fetch https://example.com/a.html":                  "",
		"email bob@example.com the notes":                   "",
		"and/or I/O v1.2 e.g. 3.14":                         "",
		"list storage accounts in my subscription":          "",
		"the root / of the disk":                            "",
		"convert welcome.wav to text":                       " (a file)",
		"summarise the PDF":                                 "",
		"show the last 10 lines of server.log, then delete": " (a file)",
	} {
		if got := pathHint(q); got != want {
			t.Errorf("pathHint(%q) = %q, want %q", q, got, want)
		}
	}
}
