"""One module per `bundle` verb; bundle.cli discovers them."""
