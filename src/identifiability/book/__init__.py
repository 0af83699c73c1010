"""The book: building the HTML, generated pages, handouts, and the notebook helper every chapter calls."""
