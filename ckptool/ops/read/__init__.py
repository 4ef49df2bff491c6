"""Reading checkpoints: what an open checkpoint offers (``checkpoint``), opening one of any kind
(``reader.open``), the V2 bundle and V1 table readers (``v2``, ``v1``), bounded chunked reads
(``chunks``) and the name filters every command shares (``select``). Imports no other family."""
