# The types of the compiled binding `_llamacall.c` exports, for the type checker (the .so has none).
from array import array

def token_to_piece(vocab: int, token: int, buf: bytearray, length: int, lstrip: int, special: bool) -> int: ...
def detokenize(
    vocab: int,
    tokens: array[int],
    n_tokens: int,
    text: bytearray,
    text_len_max: int,
    remove_special: bool,
    unparse_special: bool,
) -> int: ...
def scan_strings(buf: object, pos: int, n: int, checks: bool) -> tuple[int, int, int, int]: ...
def piece_detok_differences(
    vocab: int, length: int
) -> tuple[list[tuple[int, bytes, bytes, bytes]], tuple[int, int, int] | None]: ...
