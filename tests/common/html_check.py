"""Checks of the HTML reports as a browser rendered them, with Python's own parsers.

Usage: html_check.py dom FILE   FILE is a DOM as `chromium --dump-dom` printed it. Prints JSON:
                                "tags" (element name -> count), "event_attributes" (every
                                on* attribute, as "tag.attr"), "attributes" (attribute name ->
                                count), "text" (the text content), "cells" (the data-n of every
                                heatmap cell), "html_attributes" (those of the root element),
                                "headings" (the text of every <h2>), "rows" (per row of a
                                changed-tensor table, the data-v of its cells, in page order).
       html_check.py png FILE   FILE is a PNG screenshot. Prints JSON: "width", "height",
                                "colours" (distinct RGB colours), "non_white" (fraction of
                                pixels that are not near-white), decoded with zlib and the PNG
                                filters (8-bit RGB/RGBA, not interlaced, as Chromium writes).
"""
import collections
import html.parser
import json
import struct
import sys
import zlib


class Dom(html.parser.HTMLParser):
    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags = collections.Counter()
        self.attributes = collections.Counter()
        self.events = []
        self.text = []
        self.cells = []
        self.root = {}
        self.headings = []
        self.in_h2 = False
        self.rows = []
        self.in_changes = False

    def handle_starttag(self, tag, attrs):
        self.tags[tag] += 1
        for name, value in attrs:
            self.attributes[name] += 1
            if name.startswith("on"):
                self.events.append(f"{tag}.{name}")
        attrs = dict(attrs)
        if tag == "h2":
            self.in_h2 = True
            self.headings.append("")
        if tag == "html":
            self.root = attrs
        if tag == "table":
            self.in_changes = "changes" in attrs.get("class", "").split()
        if self.in_changes and tag == "tr" and "data-tensor" in attrs:
            self.rows.append([])
        if self.in_changes and tag == "td" and "data-v" in attrs and self.rows:
            self.rows[-1].append(attrs["data-v"])
        if "data-cell" in attrs:
            self.cells.append(int(attrs.get("data-n", "0")))

    def handle_endtag(self, tag):
        if tag == "table":
            self.in_changes = False
        if tag == "h2":
            self.in_h2 = False

    def handle_data(self, data):
        self.text.append(data)
        if self.in_h2:
            self.headings[-1] += data


def dom(path):
    parser = Dom()
    with open(path, encoding="utf-8") as f:
        parser.feed(f.read())
    parser.close()
    return {
        "tags": parser.tags,
        "attributes": parser.attributes,
        "event_attributes": parser.events,
        "text": "".join(parser.text),
        "cells": parser.cells,
        "html_attributes": parser.root,
        "headings": parser.headings,
        "rows": parser.rows,
    }


def png(path):
    data = open(path, "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    at, idat, header = 8, b"", None
    while at < len(data):
        length, kind = struct.unpack(">I4s", data[at:at + 8])
        chunk = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", chunk)
        elif kind == b"IDAT":
            idat += chunk
        at += 12 + length
    width, height, depth, colour_type, _, _, interlace = header
    assert depth == 8 and colour_type in (2, 6) and interlace == 0, header
    bpp = 3 if colour_type == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    previous = bytearray(stride)
    colours = set()
    non_white = 0
    at = 0
    for _ in range(height):
        kind = raw[at]
        line = bytearray(raw[at + 1:at + 1 + stride])
        at += 1 + stride
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b = previous[i]
            c = previous[i - bpp] if i >= bpp else 0
            if kind == 1:
                line[i] = (line[i] + a) & 255
            elif kind == 2:
                line[i] = (line[i] + b) & 255
            elif kind == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[i] = (line[i] + pred) & 255
        for i in range(0, stride, bpp):
            rgb = (line[i], line[i + 1], line[i + 2])
            colours.add(rgb)
            if min(rgb) < 235:
                non_white += 1
        previous = line
    return {
        "width": width,
        "height": height,
        "colours": len(colours),
        "non_white": non_white / (width * height),
    }


if __name__ == "__main__":
    what, path = sys.argv[1], sys.argv[2]
    print(json.dumps(dom(path) if what == "dom" else png(path)))
