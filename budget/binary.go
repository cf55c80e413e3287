package budget

import (
	"path/filepath"
	"strings"
)

// binaryExt lists extensions whose files are binary whatever their first
// bytes say (spec §6 rule 3).
var binaryExt = map[string]bool{
	".7z": true, ".a": true, ".avi": true, ".bin": true, ".bmp": true, ".bz2": true, ".class": true,
	".dll": true, ".dmg": true, ".doc": true, ".docx": true, ".dylib": true, ".eot": true, ".exe": true,
	".flac": true, ".gif": true, ".gz": true, ".ico": true, ".iso": true, ".jar": true, ".jpeg": true,
	".jpg": true, ".lib": true, ".mkv": true, ".mov": true, ".mp3": true, ".mp4": true, ".o": true,
	".obj": true, ".ogg": true, ".otf": true, ".pdf": true, ".png": true, ".ppt": true, ".pptx": true,
	".psd": true, ".pyc": true, ".pyo": true, ".rar": true, ".rpm": true, ".deb": true, ".so": true,
	".sqlite": true, ".tar": true, ".tgz": true, ".tif": true, ".tiff": true, ".ttf": true, ".war": true,
	".wasm": true, ".wav": true, ".webm": true, ".webp": true, ".woff": true, ".woff2": true, ".xls": true,
	".xlsx": true, ".xz": true, ".zip": true, ".zst": true,
}

// IsBinary reports whether a file is binary content to refuse (Read) or skip
// (Grep): a known binary extension, a NUL byte in the first 4 KiB of head, or
// a first 4 KiB more than 30% non-printable. head is the start of the file;
// only its first 4 KiB are looked at.
func IsBinary(path string, head []byte) bool {
	return binaryExt[strings.ToLower(filepath.Ext(path))] || looksBinary(head)
}
