"""Copy a dev build's forms into another dev build's folder under a suffixed name, with their index entries, so one
``GCMOE_ROLE2_CUBINS`` folder holds both arms of an A/B across a code change (s61-b: session 60's ``_ppksafwre`` as
``_ppksafwreo``). The cubin's entry symbol stays the one its index entry names.

    python3 add_old_forms.py build/dev_s61 build/dev_s61b _ppksafwre o
"""
import json
import shutil
import sys
from pathlib import Path

src, dst, form, suffix = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3], sys.argv[4]
old, new = json.loads((src / "index.json").read_text()), json.loads((dst / "index.json").read_text())
for name, info in old.items():
    if name.endswith(form):
        shutil.copy(src / f"{name}.cubin", dst / f"{name}{suffix}.cubin")
        new[name + suffix] = info
(dst / "index.json").write_text(json.dumps(new, indent=1, sort_keys=True))
print(f"{dst}: {len(new)} entries")
