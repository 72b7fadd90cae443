package placementsvg

import (
	"bytes"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
)

// Titles parses an SVG as XML and returns the texts of its <title> elements (what a picture names:
// groups, "gang on node" cells, outlines), in document order. An SVG that is not well-formed XML is
// an error; tests check pictures with it.
func Titles(svg []byte) ([]string, error) {
	d := xml.NewDecoder(bytes.NewReader(svg))
	var titles []string
	in := false
	for {
		tok, err := d.Token()
		if errors.Is(err, io.EOF) {
			return titles, nil
		}
		if err != nil {
			return nil, fmt.Errorf("the SVG is not well-formed XML: %w", err)
		}
		switch v := tok.(type) {
		case xml.StartElement:
			in = v.Name.Local == "title"
		case xml.CharData:
			if in {
				titles = append(titles, string(v))
			}
		case xml.EndElement:
			in = false
		}
	}
}
