from einc.errors import EincError
