"""`workbench demo`: the whole alignment method on CPU with the reference models, clean or with one planted fault."""
