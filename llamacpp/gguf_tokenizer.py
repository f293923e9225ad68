"""A GGUF file given another's tokenizer: what a converted full-weights checkpoint needs to
tokenize exactly as its GGUF base does (``llamacpp.convert``: the tokenizer
transformers derives from a GGUF is read back by the converter as another kind of vocabulary).
Plain GGUF metadata I/O with the ``gguf`` package, pinned at the llama.cpp tree's version."""

from __future__ import annotations

from pathlib import Path


def with_tokenizer_of(weights: Path, vocabulary: Path, out: Path) -> None:
    """``weights``' GGUF with ``vocabulary``'s ``tokenizer.*`` metadata in place of its own."""
    import gguf

    source, vocab = gguf.GGUFReader(weights), gguf.GGUFReader(vocabulary)
    arch = source.fields[gguf.Keys.General.ARCHITECTURE]
    writer = gguf.GGUFWriter(str(out), str(arch.contents()))

    def copy(field: gguf.ReaderField) -> None:
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        writer.add_key_value(field.name, field.contents(), kind, sub_type=sub)

    for field in source.fields.values():
        if field.name.startswith(("GGUF.", "tokenizer.")) or field.name == arch.name:
            continue
        copy(field)
    for field in vocab.fields.values():
        if field.name.startswith("tokenizer."):
            copy(field)
    for t in source.tensors:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in source.tensors:
        writer.write_tensor_data(t.data)
    writer.close()
